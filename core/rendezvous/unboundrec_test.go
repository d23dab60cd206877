package rendezvous

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A deferral of a socket not bound yet: its record is pending until the
// connect() picked the port, and a FindDeferred that comes first waits for
// the name; the pulled connection then goes on as any deferred one.
func TestUnboundRecordFoundAfterBind(t *testing.T) {
	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second // the bind below comes well within it, however loaded the machine
	conn, puller, answers := deferPair(t, nil)
	d, err := conn.Defer(Tuple{Client: ap("0.0.0.0:0"), Server: ap("127.0.0.1:8080")}, tcpSocket(t))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Pending() {
		t.Fatal("a deferral of port 0 is not pending")
	}
	names := recordNames(t, conn)
	if len(names) != 1 {
		t.Fatalf("record directory %v, want one pending record", names)
	}
	if s, ino, ok := parsePendingRecordName(names[0]); !ok || s != ap("127.0.0.1:8080") || ino == 0 {
		t.Fatalf("pending record %q: server %v, socket %d, %v", names[0], s, ino, ok)
	}
	if _, quiet := puller.Quiet(); quiet {
		t.Fatal("a pending record leaves the record directory quiet")
	}
	local, remote := ap("127.0.0.1:8080"), ap("127.0.0.1:41002")
	bound := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Millisecond) // the connector's way back from connect()
		bound <- conn.BindDeferred(&d, ap("127.0.0.1:41002"))
	}()
	rec, err := puller.FindDeferred(local, remote)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	if d.Pending() || rec.Nonce != d.Nonce || rec.Tuple != d.Tuple {
		t.Fatalf("record %+v, deferral %+v", rec, d)
	}
	if names := recordNames(t, conn); len(names) != 1 || names[0] != recordName(d.Tuple) {
		t.Fatalf("record directory %v after the bind", names)
	}
	a := pullAccepted(t, puller, rec, local, remote, answers, "offer")
	defer a.Close()
	conn.Undefer(d)
	if names := recordNames(t, conn); len(names) != 0 {
		t.Fatalf("record directory %v after Undefer", names)
	}
}

// A connection whose record is not pending (another connection's is)
// waits no longer than it takes the pending one to be named; one with no
// pending record to its address does not wait at all.
func TestUnboundRecordOtherConnection(t *testing.T) {
	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second
	conn, puller, _ := deferPair(t, nil)
	d, err := conn.Defer(Tuple{Client: ap("0.0.0.0:0"), Server: ap("127.0.0.1:8080")}, tcpSocket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Undefer(d)
	go func() {
		time.Sleep(3 * time.Millisecond)
		conn.BindDeferred(&d, ap("127.0.0.1:41003"))
	}()
	began := time.Now()
	_, err = puller.FindDeferred(ap("127.0.0.1:8080"), ap("127.0.0.1:41004"))
	if ReasonOf(err) != ReasonNotShimmed {
		t.Fatalf("another connection's record: %v", err)
	}
	if took := time.Since(began); took >= unboundWait {
		t.Fatalf("waited %v, the whole of unboundWait, for a record bound after 3 ms", took)
	}
	began = time.Now()
	_, err = puller.FindDeferred(ap("127.0.0.1:9090"), ap("127.0.0.1:41005"))
	if ReasonOf(err) != ReasonNotShimmed || time.Since(began) >= unboundWait {
		t.Fatalf("no pending record to the address: %v after %v", err, time.Since(began))
	}
}

// A pending record that is never named is waited for up to unboundWait
// where the kernel cannot say whose the connection is (here: no such
// connection; the reason then connector-late), and not at all once it is older
// than unboundFresh (a connect() the kernel never completed); the sweep
// removes one whose process is gone.
func TestUnboundRecordStale(t *testing.T) {
	conn, puller, _ := deferPair(t, nil)
	d, err := conn.Defer(Tuple{Client: ap("0.0.0.0:0"), Server: ap("127.0.0.1:8080")}, tcpSocket(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Undefer(d)
	began := time.Now()
	_, err = puller.FindDeferred(ap("127.0.0.1:8080"), ap("127.0.0.1:41006"))
	if took := time.Since(began); ReasonOf(err) != ReasonConnectorLate || took < unboundWait {
		t.Fatalf("unnamed pending record: %v after %v", err, took)
	}
	if st := puller.Stats(); st.Fallback(ReasonConnectorLate) != 1 {
		t.Fatalf("%d fallbacks counted connector-late, want 1", st.Fallback(ReasonConnectorLate))
	}
	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second // not waited for: the record is too old
	dir := filepath.Join(conn.cfg.RunDir, recordDir)
	old := time.Now().Add(-2 * unboundFresh)
	if err := os.Chtimes(filepath.Join(dir, d.name), old, old); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	_, err = puller.FindDeferred(ap("127.0.0.1:8080"), ap("127.0.0.1:41007"))
	if took := time.Since(began); ReasonOf(err) != ReasonNotShimmed || took >= unboundWait {
		t.Fatalf("old pending record: %v after %v", err, took)
	}

	// A dead process's pending record: the sweep removes it.
	deadPID := deadPid(t)
	r := recordFile{owner: conn.self(), nonce: d.Nonce}
	r.pid = deadPID
	name := pendingRecordName(ap("127.0.0.1:8080"), deadPID, 7)
	if err := conn.withRecordDir(false, func(dirfd int) error {
		return writeFileAt(dirfd, name, r.encode(), deadPID)
	}); err != nil {
		t.Fatal(err)
	}
	puller.withRunDir(false, func(dirfd int) error {
		puller.sweep(dirfd)
		return nil
	})
	if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Fatalf("a dead process's pending record after the sweep: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, d.name)); err != nil {
		t.Fatalf("a live process's pending record after the sweep: %v", err)
	}
}

func TestPendingRecordNames(t *testing.T) {
	for _, name := range []string{
		pendingRecordName(ap("127.0.0.1:80"), 12, 0xdeadbeef),
		pendingRecordName(ap("[::1]:443"), 1, 0),
		pendingRecordName(ap("[::ffff:10.0.0.1]:8080"), 99999, 1), // canonical: unmapped
	} {
		if _, _, ok := parsePendingRecordName(name); !ok {
			t.Errorf("%q does not parse", name)
		}
	}
	for _, name := range []string{
		"u", "u127.0.0.1:80", "u127.0.0.1:80-12", "u127.0.0.1:80-12-beef", "u127.0.0.1:0-12-deadbeef",
		"u0.0.0.0:80-12-deadbeef", "u127.0.0.1:80-0-deadbeef", "u127.0.0.1:80-012-deadbeef",
		"u127.0.0.1:80-12-DEADBEEF", "u::ffff:10.0.0.1:80-12-deadbeef", "d127.0.0.1:80-12-deadbeef",
		"u127.0.0.1:80-12-deadbeef-",
	} {
		if _, _, ok := parsePendingRecordName(name); ok {
			t.Errorf("%q parses", name)
		}
	}
}

// recordNames lists n's record directory.
func recordNames(t *testing.T, n *Node) []string {
	t.Helper()
	var names []string
	err := n.withRecordDir(false, func(dirfd int) error {
		var err error
		names, err = readDirNames(dirfd)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if unix.Kill(p.Pid, 0) != unix.ESRCH {
		t.Skip("the exited process's pid is in use again")
	}
	return p.Pid
}

// A listing is kept for the state of the record directory it was made in:
// a record written since changes the state, and the next miss lists
// again.
func TestPendingSeenState(t *testing.T) {
	n := newNode(t, Config{RunDir: runDir(t)})
	err := n.withRecordDir(true, func(dirfd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(dirfd, &st); err != nil {
			return err
		}
		var p pendingSeen
		if p.none(st, ap("127.0.0.1:80")) {
			t.Error("nothing listed yet, and none pending")
		}
		p.saw(dirfd, st, map[netip.AddrPort]bool{ap("127.0.0.1:81"): true}, n.pid)
		if !p.stamp.ok {
			// A file system without fine timestamps: kept only once the
			// directory is a tick old.
			time.Sleep(timestampTick)
			if err := unix.Fstat(dirfd, &st); err != nil {
				return err
			}
			p.saw(dirfd, st, map[netip.AddrPort]bool{ap("127.0.0.1:81"): true}, n.pid)
		}
		if !p.none(st, ap("127.0.0.1:80")) || p.none(st, ap("127.0.0.1:81")) {
			t.Errorf("listed: none pending to :80 %v, to :81 %v", p.none(st, ap("127.0.0.1:80")), p.none(st, ap("127.0.0.1:81")))
		}
		if err := writeFileAt(dirfd, pendingRecordName(ap("127.0.0.1:80"), n.pid, 1), []byte("x"), n.pid); err != nil {
			return err
		}
		var now unix.Stat_t
		if err := unix.Fstat(dirfd, &now); err != nil {
			return err
		}
		if p.none(now, ap("127.0.0.1:80")) {
			t.Error("a record written since the listing: still taken as none pending")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
