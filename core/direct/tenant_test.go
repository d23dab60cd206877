package direct

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// newBoard makes a tenant board in a file of the test's, laid out as the
// Go core lays it out, and returns its descriptor and its path.
func newBoard(t *testing.T) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tenants")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	head := make([]byte, boardSize)
	binary.LittleEndian.PutUint32(head, boardMagic)
	binary.LittleEndian.PutUint32(head[4:], boardVersion)
	binary.LittleEndian.PutUint32(head[8:], uint32(boardEntries))
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	return int(f.Fd()), path
}

// TestBoardLayout: the board as preload/c/tenant.h lays it out is the one
// core/rendezvous makes and reads.
func TestBoardLayout(t *testing.T) {
	for _, c := range []struct {
		what   string
		c, goV int
	}{
		{"magic", boardMagic, rendezvous.BoardMagic},
		{"version", boardVersion, rendezvous.BoardVersion},
		{"entries", boardEntries, rendezvous.BoardEntries},
		{"header", entryAt, rendezvous.BoardHeader},
		{"starved mark", starvedAt, rendezvous.BoardStarved},
		{"entry", entrySize, rendezvous.BoardEntry},
		{"size", boardSize, rendezvous.BoardSize},
	} {
		if c.c != c.goV {
			t.Errorf("board %s: %d in C, %d in core/rendezvous", c.what, c.c, c.goV)
		}
	}
}

// tenantEnv names the board, entry and demand a re-run of the test binary
// writes as another tenant (TestMain).
const tenantEnv = "DIRECT_TEST_TENANT"

func TestMain(m *testing.M) {
	if v := os.Getenv(tenantEnv); v != "" {
		beOtherTenant(v)
		return
	}
	os.Exit(m.Run())
}

// beOtherTenant writes the entry spec ("PATH ENTRY DEMAND") names as
// this process's, its time fresh every millisecond, until it is killed.
func beOtherTenant(spec string) {
	var path string
	var i int
	var demand uint32
	if _, err := fmt.Sscan(spec, &path, &i, &demand); err != nil {
		panic(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	for {
		rendezvous.WriteEntry(fd, i, rendezvous.TenantEntry{PID: os.Getpid(), Demand: int(demand), Beat: rendezvous.BoardNow()})
		time.Sleep(time.Millisecond)
	}
}

// otherTenant starts another process that writes entry i of the board
// at path as its own, wanting demand bulk streams, its time fresh, until
// the returned stop is called: a process, so that it keeps its entry
// fresh while this one's threads keep the CPUs busy. It returns once the
// entry is there.
func otherTenant(t *testing.T, fd int, path string, i int, demand uint32) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", tenantEnv, path, i, demand))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, _ := rendezvous.ReadBoard(fd)
		for _, e := range b.Entries {
			if e.PID == cmd.Process.Pid {
				return stop
			}
		}
	}
	stop()
	t.Fatal("the other tenant wrote no entry in 10 s")
	return nil
}

// streams moves total bytes over each of n fresh pairs at once, each
// with blocking 64 KiB sends through the tenant gate with board fd
// (-1: none), checking every byte; while they run it samples the gate
// (most turns held, most threads waiting, the cap) and this process's
// demand on the board. It returns each sender's pauses.
func streams(t *testing.T, n, total, fd int) (pauses []uint64, held, waiting, cap, demand int) {
	t.Helper()
	txs := make([]*Conn, n)
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for i := range txs {
		tx, rx := pair(t, 16, 16384)
		tx.SetPreempt(true)
		tx.SetBoard(fd)
		txs[i] = tx
		wg.Add(2)
		go func() { defer wg.Done(); errs <- receive(rx, total) }()
		go func() {
			// A thread of its own, as a program's senders have: the gate
			// tells senders apart by thread (a turn last used on the
			// asking thread is its own), and goroutines move between them.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer wg.Done()
			errs <- send(tx, total, nil)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	deadline, capSince := time.After(60*time.Second), time.Now()
	for sampling := true; sampling; {
		select {
		case <-finished:
			sampling = false
		case <-deadline:
			t.Fatal("the streams did not finish in 60 s")
		case <-time.After(200 * time.Microsecond):
		}
		c, h, w := turns()
		waiting = max(waiting, w)
		if c != cap {
			cap, capSince = c, time.Now()
		}
		if time.Since(capSince) > 10*time.Millisecond { // past the sub-writes begun under an earlier cap
			held = max(held, h)
		}
		if b, err := rendezvous.ReadBoard(fd); err == nil { // none where the board was cut short
			for _, e := range b.Entries {
				if e.PID == os.Getpid() {
					demand = max(demand, e.Demand)
				}
			}
		}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tx := range txs {
		pauses = append(pauses, tx.Stats().Pauses)
	}
	return pauses, held, waiting, cap, demand
}

func pattern(off int) byte { return byte(off*7 + off>>16) }

// send sends total bytes of pattern in blocking sends of up to 64 KiB,
// calling before (when not nil) ahead of each; it polls where a send
// would sleep (a test need not).
func send(tx *Conn, total int, before func()) error {
	buf := make([]byte, 64<<10)
	for sent := 0; sent < total; {
		if before != nil {
			before()
		}
		m := min(len(buf), total-sent)
		for i := range m {
			buf[i] = pattern(sent + i)
		}
		n, sl, err := tx.Send(buf[:m], true)
		if sl != nil {
			tx.Woke(sl)
			continue
		}
		if err != nil {
			return fmt.Errorf("send: %v", err)
		}
		sent += n
	}
	return nil
}

// receive reads total bytes and checks them against pattern.
func receive(rx *Conn, total int) error {
	buf, want := make([]byte, 64<<10), make([]byte, 64<<10)
	for off := 0; off < total; {
		n, sl, err := rx.Recv(buf, false, true)
		if sl != nil {
			rx.Woke(sl)
			continue
		}
		if err != nil || n == 0 {
			return fmt.Errorf("at byte %d: %d bytes, %v", off, n, err)
		}
		for i := range n {
			want[i] = pattern(off + i)
		}
		if !bytes.Equal(buf[:n], want[:n]) {
			return fmt.Errorf("at byte %d: not the bytes sent", off)
		}
		off += n
	}
	return nil
}

// quiet waits out what earlier tests left: their turns go stale, their
// board entries old (100 ms), and a preemption mark (preload/c/direct.c,
// 50 ms) ends.
func quiet() { time.Sleep(120 * time.Millisecond) }

// settle has one stream look at the board at fd, so that the gate's cap
// is that board's before streams run that must not wait: a stream that
// begins while another looks takes the cap from before.
func settle(t *testing.T, fd int) {
	t.Helper()
	quiet()
	streams(t, 1, 1<<20, fd)
	time.Sleep(2 * time.Millisecond) // past the look's interval
}

// The tenant gate (preload/c/tenant.c): beside another process of the
// user that wants one bulk stream, this process's four bulk streams take
// turns, one at a time on a machine of up to 7 CPUs (more where the CPUs
// allow), each waiting its turn, and every byte arrives; its entry on
// the board says it wants four. Alone, none waits (work-conserving), and
// once the other stops, none waits again.
func TestTenantTurns(t *testing.T) {
	fd, path := newBoard(t)
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	wantCap := max(1, cpus.Count()/4) // two tenants: CPUs over twice the tenants, at least the other's 1

	settle(t, fd)
	// Alone, the board is looked at every 10 ms: a run of the four
	// streams may fall between two looks, or have a look only as it
	// starts or ends (one stream sending). So the streams run again, up
	// to five times, until a look saw more than one (each run must pause
	// never).
	held, demand := 0, 0
	for run := 0; run < 5 && demand < 2; run++ {
		pauses, h, _, _, d := streams(t, 4, 16<<20, fd)
		for i, p := range pauses {
			if p != 0 {
				t.Errorf("alone: stream %d paused %d times, want never", i, p)
			}
		}
		held, demand = max(held, h), max(demand, d)
	}
	if demand < 2 {
		t.Errorf("alone: this process's demand on the board was at most %d in 5 runs, want 4 at some point", demand)
	}
	t.Logf("alone: at most %d turns held, demand %d", held, demand)

	quiet()
	stop := otherTenant(t, fd, path, 100, 1)
	pauses, held, waiting, cap, demand := streams(t, 4, 16<<20, fd)
	stop()
	if cap != wantCap {
		t.Errorf("beside a tenant of one stream: cap %d, want %d", cap, wantCap)
	}
	if held > wantCap {
		t.Errorf("beside a tenant of one stream: %d turns held at once, want at most %d", held, wantCap)
	}
	if wantCap < 4 {
		waited := 0
		for _, p := range pauses {
			if p > 0 {
				waited++
			}
		}
		if waited < 4-wantCap || waiting == 0 {
			t.Errorf("beside a tenant of one stream: %d streams waited for a turn (%v), at most %d threads waiting; want at least %d", waited, pauses, waiting, 4-wantCap)
		}
	}
	if demand < 3 { // 4 less a holder blocked on a full ring for a while (its turn looks unused)
		t.Errorf("beside a tenant of one stream: this process's demand on the board was at most %d, want 3 or 4", demand)
	}
	t.Logf("beside one: pauses %v, at most %d held, %d waiting, demand %d", pauses, held, waiting, demand)

	// The other tenant stopped: past its entry's freshness the gate gives
	// every turn again.
	everyTurn(t, "after the other tenant stopped", fd)
}

// everyTurn runs two bulk streams through the board at fd, settled, and
// checks that the gate gave every turn (256) and that none waited.
func everyTurn(t *testing.T, what string, fd int) {
	t.Helper()
	settle(t, fd)
	pauses, _, _, cap, _ := streams(t, 2, 4<<20, fd)
	if cap != 256 {
		t.Errorf("%s: cap %d, want every turn (256)", what, cap)
	}
	for i, p := range pauses {
		if p != 0 {
			t.Errorf("%s: stream %d paused %d times", what, i, p)
		}
	}
}

// A board another process of the user filled with garbage, or cut short,
// costs turns at most: every byte arrives, nothing hangs, and a board
// that cannot be read gives every turn.
func TestTenantBoardHostile(t *testing.T) {
	fd, _ := newBoard(t)
	quiet()
	rng := rand.New(rand.NewSource(1))
	junk := make([]byte, boardSize-entryAt)
	rng.Read(junk)
	for i := 0; i < len(junk); i += entrySize { // fresh times, any pid, small demands or any
		binary.LittleEndian.PutUint64(junk[i+8:], uint64(rendezvous.BoardNow()-time.Duration(rng.Intn(5e6))))
		if i%(2*entrySize) == 0 {
			binary.LittleEndian.PutUint32(junk[i+4:], uint32(rng.Intn(4)))
		}
	}
	if _, err := unix.Pwrite(fd, junk, int64(entryAt)); err != nil {
		t.Fatal(err)
	}
	pauses, held, _, cap, _ := streams(t, 3, 4<<20, fd) // every byte, in time
	t.Logf("garbage board: pauses %v, at most %d held, cap %d", pauses, held, cap)

	if err := unix.Ftruncate(fd, 100); err != nil {
		t.Fatal(err)
	}
	everyTurn(t, "board cut short", fd)
}

// A thread that writes bulk data to two connections in turn (a
// single-threaded program) takes its own turn from one connection to the
// other at once: capped at one turn beside another tenant, it never
// waits for a turn it holds itself.
func TestTenantOneThreadTwoConns(t *testing.T) {
	fd, path := newBoard(t)
	quiet()
	stop := otherTenant(t, fd, path, 100, 1)
	defer stop()
	settle(t, fd)
	var txs [2]*Conn
	errs := make(chan error, 2)
	const total = 8 << 20
	for i := range txs {
		tx, rx := pair(t, 16, 16384)
		tx.SetPreempt(true)
		tx.SetBoard(fd)
		txs[i] = tx
		go func() { errs <- receive(rx, total) }()
	}
	runtime.LockOSThread()
	buf := make([]byte, 64<<10)
	sent := [2]int{}
	for k := 0; sent[0] < total || sent[1] < total; k ^= 1 {
		if sent[k] == total {
			continue
		}
		m := min(len(buf), total-sent[k])
		for i := range m {
			buf[i] = pattern(sent[k] + i)
		}
		n, sl, err := txs[k].Send(buf[:m], true)
		if sl != nil {
			txs[k].Woke(sl)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sent[k] += n
	}
	runtime.UnlockOSThread()
	for range txs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cap, _, _ := turns()
	for i, tx := range txs {
		if p := tx.Stats().Pauses; p != 0 {
			t.Errorf("connection %d waited %d times for a turn its own thread held (cap %d)", i, p, cap)
		}
	}
}
