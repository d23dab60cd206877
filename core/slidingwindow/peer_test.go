package slidingwindow

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/shm"
)

// Cross-process tests run side B in a second process: the test binary
// itself, re-executed with envPeer naming the case ("name blocks size
// seed deadline-unix-ns count") and one end of a unix socketpair as fd 3. Both
// sides set up over that socket (Open or setup.Establish) and afterwards
// step through the case with 8-byte control words on it. Side B reports a
// failure on stderr and through its exit status; it exits on its own past
// the deadline, and the test kills it at cleanup, so none survives a run.

const (
	envPeer   = "SLIDINGWINDOW_TEST_PEER"
	peerFD    = 3
	peerGrace = 5 * time.Second
)

// peerEnv is what a side of a cross-process case works with.
type peerEnv struct {
	fd       int // setup socket, then control words
	cfg      Config
	seed     uint64
	count    int // the case's size (blocks, rounds), the same on both sides
	deadline time.Time
	p        *shm.Provider
}

// open opens the side's transport over the setup socket.
func (e *peerEnv) open() (*Transport, error) { return Open(e.p, e.fd, e.cfg, e.deadline) }

// send writes one control word.
func (e *peerEnv) send(v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, err := unix.Write(e.fd, b[:])
	return err
}

// recv reads one control word by the deadline.
func (e *peerEnv) recv() (uint64, error) {
	var b [8]byte
	for got := 0; got < len(b); {
		if err := waitReadable(e.fd, e.deadline); err != nil {
			return 0, err
		}
		n, err := unix.Read(e.fd, b[got:])
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, fmt.Errorf("control socket: EOF")
		}
		got += n
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// expect reads one control word and checks it.
func (e *peerEnv) expect(want uint64) error {
	v, err := e.recv()
	if err == nil && v != want {
		err = fmt.Errorf("control word %d, want %d", v, want)
	}
	return err
}

func waitReadable(fd int, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(min(left.Milliseconds()+1, 1000)))
		if err == unix.EINTR || n == 0 {
			continue
		}
		return err
	}
}

// peerSides are the B sides of the cross-process cases, by name.
var peerSides = map[string]func(e *peerEnv) error{}

// TestMain runs side B when started as a peer process.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(envPeer); ok {
		os.Unsetenv(envPeer)
		os.Exit(servePeer(spec))
	}
	os.Exit(m.Run())
}

func servePeer(spec string) int {
	f := strings.Fields(spec)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "peer %q: %s\n", spec, fmt.Sprintf(format, args...))
		return 1
	}
	if len(f) != 6 {
		return fail("malformed spec")
	}
	side, ok := peerSides[f[0]]
	if !ok {
		return fail("no such case")
	}
	var v [5]uint64
	for i := range v {
		x, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return fail("%v", err)
		}
		v[i] = x
	}
	e := &peerEnv{fd: peerFD, cfg: Config{Blocks: int(v[0]), BlockSize: int(v[1])}, seed: v[2],
		deadline: time.Unix(0, int64(v[3])), count: int(v[4])}
	unix.CloseOnExec(peerFD)
	time.AfterFunc(time.Until(e.deadline)+peerGrace, func() {
		fmt.Fprintf(os.Stderr, "peer %q: still running past the deadline; exiting\n", spec)
		os.Exit(2)
	})
	p, err := shm.Open()
	if err != nil {
		return fail("open provider: %v", err)
	}
	e.p = p
	fds := countFDs()
	if err := side(e); err != nil {
		return fail("%v", err)
	}
	// Everything the side opened is closed again.
	if err := p.Close(); err != nil {
		return fail("after the case: %v", err)
	}
	if n := countFDs(); n != fds {
		return fail("after the case: %d file descriptors open, %d before", n, fds)
	}
	return 0
}

// countFDs counts this process's open file descriptors (-1 if unknown).
func countFDs() int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(d) - 1 // the directory's own
}

// peerProc is a running side B.
type peerProc struct {
	pid    int
	out    *lockedBuffer
	done   chan struct{} // closed once it exited and err is set
	err    error
	killed bool // by side A, on purpose
}

// kill kills side B (if it still runs) and returns its exit error.
func (p *peerProc) kill() error {
	select {
	case <-p.done:
	default:
		unix.Kill(p.pid, unix.SIGKILL)
		<-p.done
	}
	return p.err
}

// killOnPurpose kills side B as part of the case: its exit status no
// longer counts.
func (p *peerProc) killOnPurpose() {
	p.killed = true
	p.kill()
}

// wait returns side B's exit error, or kills it past the deadline.
func (p *peerProc) wait(deadline time.Time) error {
	t := time.NewTimer(time.Until(deadline) + peerGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		p.kill()
		return fmt.Errorf("peer process still running past the deadline; killed")
	}
}

// startPeer starts side B of case name and returns side A's environment
// (its own provider, closed at cleanup) and the process.
func startPeer(t testing.TB, name string, cfg Config, seed uint64, count int) (*peerEnv, *peerProc) {
	t.Helper()
	if _, ok := peerSides[name]; !ok {
		t.Fatalf("no peer side %q", name)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	dl := deadline()
	c := cfg
	if err := c.normalize(); err != nil {
		t.Fatal(err)
	}
	peerEnd := os.NewFile(uintptr(fds[1]), "slidingwindow-peer")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d %d %d", envPeer, name, c.Blocks, c.BlockSize, seed, dl.UnixNano(), count),
		// The race detector would hold every peer's exit for a second.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.ExtraFiles = []*os.File{peerEnd}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	peerEnd.Close()
	if err != nil {
		unix.Close(fds[0])
		t.Fatalf("start peer process: %v", err)
	}
	proc := &peerProc{pid: cmd.Process.Pid, out: out, done: make(chan struct{})}
	go func() {
		proc.err = cmd.Wait()
		close(proc.done)
	}()
	p, err := shm.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.kill()
		unix.Close(fds[0])
		if err := p.Close(); err != nil {
			t.Errorf("provider still busy at the end of the test: %v", err)
		}
		if t.Failed() && out.Len() > 0 {
			t.Logf("peer process output:\n%s", out.String())
		}
	})
	return &peerEnv{fd: fds[0], cfg: cfg, seed: seed, count: count, deadline: dl, p: p}, proc
}

// runPeer runs side A of a cross-process case against its side B and
// checks that both succeed.
func runPeer(t *testing.T, name string, cfg Config, seed uint64, count int, a func(e *peerEnv, proc *peerProc) error) {
	t.Helper()
	e, proc := startPeer(t, name, cfg, seed, count)
	if err := a(e, proc); err != nil {
		t.Errorf("side A: %v", err)
	}
	if err := proc.wait(e.deadline); err != nil && !proc.killed {
		t.Errorf("side B: %v\n%s", err, proc.out.String())
	}
}

// lockedBuffer collects the peer's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
