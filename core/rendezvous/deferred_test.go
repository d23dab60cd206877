package rendezvous

import (
	"context"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deferPair returns a connector node (its OnPull offers to the puller and
// commits, unless refuse says otherwise) and a puller node in one run
// directory. answers receives the connector's committed Answers.
func deferPair(t *testing.T, refuse func(PullRequest) error) (conn, puller *Node, answers chan *Answer) {
	t.Helper()
	dir := runDir(t)
	answers = make(chan *Answer, 4)
	conn = newNode(t, Config{RunDir: dir, Handler: echoHandler})
	conn.cfg.OnPull = func(req PullRequest) error {
		if refuse != nil {
			if err := refuse(req); err != nil {
				return err
			}
		}
		t := Tuple{Client: req.Tuple.Client, Server: req.Tuple.Server}
		a, err := conn.Offer(context.Background(), req.From, t, Payload{Data: []byte("offer")})
		if err != nil {
			return err
		}
		if err := a.Commit(); err != nil {
			a.Close()
			return err
		}
		a.Payload.CloseFiles()
		answers <- a
		return nil
	}
	d := newDrops()
	puller = newNode(t, Config{RunDir: dir, Handler: echoHandler, OnDrop: d.onDrop})
	return conn, puller, answers
}

// pullAccepted pulls rec as puller (local, remote: the accepted socket's
// addresses), wants the offer's data to be data, and returns the
// connector's Answer (from answers) once its verdict says accepted.
func pullAccepted(t *testing.T, puller *Node, rec Record, local, remote netip.AddrPort, answers chan *Answer, data string) *Answer {
	t.Helper()
	m, err := puller.Pull(rec, local, remote, time.Now().Add(PullWait))
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Prepared.(*prepared); p.data != data {
		t.Fatalf("prepared %q, want %q", p.data, data)
	} else {
		p.release()
	}
	a := <-answers
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		a.Close()
		t.Fatalf("verdict %s, want accepted", v)
	}
	return a
}

func TestDeferredPullClaims(t *testing.T) {
	conn, puller, answers := deferPair(t, nil)
	tuple := Tuple{Client: ap("0.0.0.0:41001"), Server: ap("127.0.0.1:8080")}
	d, err := conn.Defer(tuple, -1)
	if err != nil {
		t.Fatal(err)
	}
	// The acceptor sees the connector's real address; the record is filed
	// under its port alone.
	local, remote := ap("127.0.0.1:8080"), ap("127.0.0.1:41001")
	rec, err := puller.FindDeferred(local, remote)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Nonce != d.Nonce || rec.PID != os.Getpid() {
		t.Fatalf("record %+v, deferral nonce %x", rec, d.Nonce)
	}
	a := pullAccepted(t, puller, rec, local, remote, answers, "offer")
	defer a.Close()
	conn.Undefer(d)
	if _, err := puller.FindDeferred(local, remote); ReasonOf(err) != ReasonNotShimmed {
		t.Fatalf("after Undefer: %v", err)
	}
	if s := puller.Stats(); s.Pulls != 1 || s.PullsClaimed != 1 {
		t.Fatalf("puller stats %+v", s)
	}
	if s := conn.Stats(); s.Deferred != 1 || s.PullsServed != 1 {
		t.Fatalf("connector stats %+v", s)
	}
}

func TestDeferredPullRefused(t *testing.T) {
	refusal := &FallbackError{Reason: ReasonDeferredUnclaimed, Err: errors.New("fell back already")}
	conn, puller, _ := deferPair(t, func(PullRequest) error { return refusal })
	tuple := Tuple{Client: ap("127.0.0.1:41002"), Server: ap("127.0.0.1:8080")}
	_, rec := deferFound(t, conn, puller, tuple)
	_, err := puller.Pull(rec, tuple.Server, tuple.Client, time.Now().Add(PullWait))
	wantReason(t, err, ReasonDeferredUnclaimed)
	// The pull ended: an offer for the tuple that comes late is refused.
	e := Entry{PID: os.Getpid(), Socket: puller.srv.path}
	ctx, cancel := offerCtx()
	defer cancel()
	_, err = conn.Offer(ctx, e, tuple, Payload{Data: []byte("late")})
	wantReason(t, err, ReasonTimeout)
}

// The PULL carries the nonce the puller read in the record (here altered)
// to the connector's OnPull, whose refusal's reason the puller gets.
func TestDeferredWrongNonce(t *testing.T) {
	conn, puller, _ := deferPair(t, nil)
	seen := make(chan [16]byte, 1)
	conn.cfg.OnPull = func(req PullRequest) error {
		seen <- req.Nonce
		return &FallbackError{Reason: ReasonProtocol, Err: errors.New("nonce")}
	}
	tuple := Tuple{Client: ap("127.0.0.1:41003"), Server: ap("127.0.0.1:8080")}
	d, rec := deferFound(t, conn, puller, tuple)
	rec.Nonce[0] ^= 1
	_, err := puller.Pull(rec, tuple.Server, tuple.Client, time.Now().Add(PullWait))
	wantReason(t, err, ReasonProtocol)
	select {
	case n := <-seen:
		if n != rec.Nonce || n == d.Nonce {
			t.Fatalf("OnPull got nonce %x; the puller sent %x, the deferral's is %x", n, rec.Nonce, d.Nonce)
		}
	default:
		t.Fatal("the PULL never reached OnPull")
	}
}

// Garbage, hostile and stale records are removed and mean plain TCP.
func TestDeferredBadRecords(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if _, err := n.Serve(); err != nil {
		t.Fatal(err)
	}
	good, err := n.Defer(Tuple{Client: ap("127.0.0.1:42000"), Server: ap("127.0.0.1:8080")}, -1)
	if err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(filepath.Join(dir, recordDir, good.name))
	if err != nil {
		t.Fatal(err)
	}
	n.Undefer(good)
	sockLine := "socket " + n.srv.path
	cases := []struct {
		name, content string
		reason        Reason
	}{
		{"garbage", "hello\n", ReasonProtocol},
		{"extra line", string(content) + "listen 1.2.3.4:5\n", ReasonProtocol},
		{"socket elsewhere", replaceLine(string(content), sockLine, "socket /tmp/p1-00000000.sock"), ReasonProtocol},
		{"short nonce", replaceLine(string(content), "nonce "+hexOf(good.Nonce[:]), "nonce 00"), ReasonProtocol},
		{"dead pid", replaceLine(replaceLine(string(content), "pid "+itoa(os.Getpid()), "pid 999999"),
			sockLine, "socket "+filepath.Join(dir, "p999999-00000000.sock")), ReasonPeerGone},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tuple := Tuple{Client: ap("127.0.0.1:" + itoa(42001+i)), Server: ap("127.0.0.1:8080")}
			path := filepath.Join(dir, recordDir, recordName(tuple))
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := n.FindDeferred(tuple.Server, tuple.Client)
			wantReason(t, err, c.reason)
			if _, err := os.Lstat(path); !os.IsNotExist(err) {
				t.Fatalf("record not removed: %v", err)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		tuple := Tuple{Client: ap("127.0.0.1:42100"), Server: ap("127.0.0.1:8080")}
		target := filepath.Join(t.TempDir(), "target")
		os.WriteFile(target, content, 0o600)
		path := filepath.Join(dir, recordDir, recordName(tuple))
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		_, err := n.FindDeferred(tuple.Server, tuple.Client)
		wantReason(t, err, ReasonProtocol)
		if _, err := os.Stat(target); err != nil {
			t.Fatalf("the link's target was touched: %v", err)
		}
	})
}

func TestRecordNames(t *testing.T) {
	for _, tu := range []Tuple{
		{Client: ap("127.0.0.1:1"), Server: ap("127.0.0.1:2")},
		{Client: ap("[::]:40000"), Server: ap("[::1]:8080")},
		{Client: ap("0.0.0.0:40000"), Server: ap("10.0.0.1:80")},
	} {
		got, ok := parseRecordName(recordName(tu))
		if !ok || got.canon() != tu.canon() {
			t.Errorf("%s: name %q parses to %s, %v", tu, recordName(tu), got, ok)
		}
	}
	for _, bad := range []string{"d", "dx-y", "d127.0.0.1:0-127.0.0.1:1", "d::-1", "l8080-1-2"} {
		if _, ok := parseRecordName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestGroupEntry(t *testing.T) {
	dir := runDir(t)
	l := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	c := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	addr := ap("127.0.0.1:18080")
	if err := l.Register(addr); err != nil {
		t.Fatal(err)
	}
	if e := lookupOne(t, c, addr); e.Group {
		t.Fatal("group before SetGroup")
	}
	if err := l.SetGroup(addr); err != nil {
		t.Fatal(err)
	}
	if e := lookupOne(t, c, addr); !e.Group {
		t.Fatal("not group after SetGroup")
	}
	if err := l.SetGroup(ap("127.0.0.1:18081")); err == nil {
		t.Fatal("SetGroup of an unregistered port")
	}
	// RegisterGroup: group from the entry's first write (no window in
	// which a connector finds the port offering for this process alone);
	// a later Register of another address on the port keeps it group.
	g := ap("127.0.0.1:18082")
	if err := l.RegisterGroup(g); err != nil {
		t.Fatal(err)
	}
	name := entryName(g.Port(), l.pid, l.start, l.nsID)
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || !strings.Contains(string(b), "\nmode group\n") {
		t.Fatalf("entry after RegisterGroup: %q %v", b, err)
	}
	if err := l.Register(ap("0.0.0.0:18082")); err != nil {
		t.Fatal(err)
	}
	if e := lookupOne(t, c, g); !e.Group {
		t.Fatal("a second address made the group port non-group")
	}
}

// deferFound defers tuple on conn (undone when the test ends) and returns
// the deferral and the record puller finds for it.
func deferFound(t *testing.T, conn, puller *Node, tuple Tuple) (Deferral, Record) {
	t.Helper()
	d, err := conn.Defer(tuple, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Undefer(d) })
	rec, err := puller.FindDeferred(tuple.Server, tuple.Client)
	if err != nil {
		t.Fatal(err)
	}
	return d, rec
}

func replaceLine(s, old, new string) string {
	out := strings.Replace(s, old+"\n", new+"\n", 1)
	if out == s {
		panic("no line " + old)
	}
	return out
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func itoa(i int) string { return strconv.Itoa(i) }

// OfferHere: the connector's committed offer goes on the PULL's own
// connection; the puller files and claims it from there (its server
// serves nothing: no connection reaches it) and the verdict comes back
// on the same connection. A second OfferHere on one PULL is refused.
// Both with Config.PullHere (the accept loop serves the PULL) and
// without (a goroutine does: TestPullsOnLoop).
func TestDeferredPullOfferHere(t *testing.T) {
	for _, here := range []bool{false, true} {
		t.Run(map[bool]string{false: "goroutine", true: "loop"}[here], func(t *testing.T) { testPullOfferHere(t, here) })
	}
}

// With Config.PullHere the connector's accept loop serves a PULL itself
// (servePulls): a second PULL that comes while the first one's handler
// runs is not taken until that handler returns. Without it each PULL is
// served on a goroutine of its own, and the second handler runs beside
// the first.
func TestPullsOnLoop(t *testing.T) {
	for _, here := range []bool{false, true} {
		t.Run(map[bool]string{false: "goroutine", true: "loop"}[here], func(t *testing.T) {
			conn, puller, _ := deferPair(t, nil)
			conn.cfg.PullHere = here
			entered := make(chan uint16, 2)
			release := make(chan struct{})
			answers := make(chan *Answer, 2)
			conn.cfg.OnPull = func(req PullRequest) error {
				entered <- req.Tuple.Client.Port()
				if req.Tuple.Client.Port() == 41021 {
					<-release
				}
				a, err := req.OfferHere(req.Tuple, Payload{Data: []byte("here")})
				if err == nil {
					answers <- a
				}
				return err
			}
			var recs []Record
			var tuples []Tuple
			for _, port := range []string{"41021", "41022"} {
				tuple := Tuple{Client: ap("127.0.0.1:" + port), Server: ap("127.0.0.1:8080")}
				_, rec := deferFound(t, conn, puller, tuple)
				recs, tuples = append(recs, rec), append(tuples, tuple)
			}
			pulled := make(chan error, 2)
			pull := func(i int) {
				m, err := puller.Pull(recs[i], tuples[i].Server, tuples[i].Client, time.Now().Add(PullWait))
				if err == nil {
					m.Prepared.(*prepared).release()
				}
				pulled <- err
			}
			go pull(0)
			if p := <-entered; p != 41021 {
				t.Fatalf("first handler for port %d", p)
			}
			go pull(1)
			// The loop's case waits a while for a handler that must not
			// come; the goroutine's returns as soon as its handler runs.
			wait := 300 * time.Millisecond
			if !here {
				wait = guard
			}
			select {
			case p := <-entered:
				if here {
					close(release)
					t.Fatalf("handler for port %d entered while the loop served the first PULL", p)
				}
			case <-time.After(wait):
				if !here {
					close(release)
					t.Fatal("the second PULL's handler did not run beside the first")
				}
			}
			close(release)
			if here {
				if p := <-entered; p != 41022 {
					t.Fatalf("second handler for port %d", p)
				}
			}
			for range 2 {
				if err := <-pulled; err != nil {
					t.Fatal(err)
				}
				a := <-answers
				if v := a.WaitVerdict(guard); v != VerdictAccepted {
					t.Errorf("verdict %s, want accepted", v)
				}
				a.Payload.CloseFiles()
				a.Close()
			}
		})
	}
}

func testPullOfferHere(t *testing.T, here bool) {
	conn, puller, _ := deferPair(t, nil)
	conn.cfg.PullHere = here
	answers := make(chan *Answer, 1)
	conn.cfg.OnPull = func(req PullRequest) error {
		a, err := req.OfferHere(req.Tuple, Payload{Data: []byte("here")})
		if err != nil {
			return err
		}
		if _, err := req.OfferHere(req.Tuple, Payload{Data: []byte("twice")}); ReasonOf(err) != ReasonProtocol {
			t.Errorf("second OfferHere: %v", err)
		}
		answers <- a
		return nil
	}
	tuple := Tuple{Client: ap("127.0.0.1:41010"), Server: ap("127.0.0.1:8080")}
	_, rec := deferFound(t, conn, puller, tuple)
	before := puller.Stats()
	a := pullAccepted(t, puller, rec, tuple.Server, tuple.Client, answers, "here")
	defer a.Close()
	a.Payload.CloseFiles()
	if string(a.Payload.Data) != "re:here" {
		t.Fatalf("verdict's answer %q", a.Payload.Data)
	}
	if s := puller.Stats(); s.Pulls != before.Pulls+1 || s.PullsClaimed != before.PullsClaimed+1 || s.Conns != before.Conns {
		t.Fatalf("puller stats %+v, before %+v: want one pull claimed, no connection to its server", s, before)
	}
}

// A handler that offered on the PULL's connection and then aborted the
// offer (its connector closed meanwhile) gives the PULL no other answer:
// the puller declines the offer when the abort byte came before its
// claim (the Pull fails, a protocol error: offered, but not filed), and
// holds an accelerated connection whose peer is gone when it came after
// (as with an offer to its server); either way the Pull returns.
func TestDeferredPullOfferHereThenAbort(t *testing.T) {
	conn, puller, _ := deferPair(t, nil)
	conn.cfg.OnPull = func(req PullRequest) error {
		a, err := req.OfferHere(req.Tuple, Payload{Data: []byte("here")})
		if err != nil {
			return err
		}
		a.Abort()
		return &FallbackError{Reason: ReasonPeerGone, Err: errors.New("connector closed")}
	}
	tuple := Tuple{Client: ap("127.0.0.1:41011"), Server: ap("127.0.0.1:8080")}
	_, rec := deferFound(t, conn, puller, tuple)
	done := make(chan error, 1)
	go func() {
		m, err := puller.Pull(rec, tuple.Server, tuple.Client, time.Now().Add(PullWait))
		if err == nil {
			m.Prepared.(*prepared).release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && ReasonOf(err) != ReasonProtocol {
			t.Fatalf("pull: %v, want a protocol fallback or a claim", err)
		}
	case <-time.After(guard):
		t.Fatal("the Pull did not return")
	}
}

// Close removes the records the node filed, from the record directory,
// so no puller finds one of a node that no longer answers.
func TestDeferredCloseRemovesRecords(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if _, err := n.Defer(Tuple{Client: ap("127.0.0.1:42001"), Server: ap("127.0.0.1:8080")}, -1); err != nil {
		t.Fatal(err)
	}
	recs := filepath.Join(dir, recordDir)
	if left, _ := os.ReadDir(recs); len(left) != 1 {
		t.Fatalf("records after Defer: %d, want 1", len(left))
	}
	n.Close()
	if left, err := os.ReadDir(recs); err != nil || len(left) != 0 {
		t.Fatalf("records after Close: %v (%v), want none", left, err)
	}
}
