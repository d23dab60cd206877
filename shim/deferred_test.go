package shim

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Deferred acceptance ("the first user claims"), driven through the hooks
// as the interposer calls them, with real processes where a second one is
// the point: the accepted fd travels by SCM_RIGHTS to a helper process
// (this test binary re-run with deferredRoleEnv set) that runs its own
// Process, as a fork child with a fresh core would.

const deferredRoleEnv = "SDPSHIM_TEST_DEFERRED_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(deferredRoleEnv); role != "" {
		if err := runDeferredRole(role); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// coreHost is a fake host whose fork children run a core (ChildCores):
// fork makes listeners group listeners.
type coreHost struct{ *fakeHost }

func (coreHost) ChildCores() bool { return true }

// newGroupProcess returns a Process on a coreHost with run directory dir.
func newGroupProcess(dir string, env ...string) (*Process, *fakeHost, error) {
	h := newFakeHost()
	p, reason := Init(coreHost{h}, testEnv(append([]string{"SDPSHIM_RUNDIR=" + dir}, env...)))
	if p == nil {
		return nil, nil, fmt.Errorf("Init declined: reason %d", reason)
	}
	return p, h, nil
}

// groupListener makes a listener of p, registered, then shared with a
// (pretended) fork child: a group listener. It returns its fd and address.
func groupListener(t *testing.T, p *Process, h *fakeHost) (int, netip.AddrPort) {
	t.Helper()
	lfd := tcpSocket(t, p, h)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if r := p.Listen(lfd, 16); r != 0 {
		t.Fatalf("listen: %d", r)
	}
	p.ForkPrepare(ForkFork)
	addr, _ := sockName(lfd)
	node, _ := p.rendezvousNode()
	es, err := node.Lookup(addr)
	if err != nil || len(es) != 1 || !es[0].Group {
		t.Fatalf("after fork: entries %+v, %v; want one group entry", es, err)
	}
	t.Cleanup(func() { p.Close(lfd); unix.Close(lfd) })
	return lfd, addr
}

// deferredConnect connects a new socket of p to addr: deferred.
func deferredConnect(t *testing.T, p *Process, h *fakeHost, addr netip.AddrPort) int {
	t.Helper()
	cfd := tcpSocket(t, p, h)
	if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 {
		t.Fatalf("connect: %d", r)
	}
	if h.FDState(cfd) != FDManaged {
		t.Fatalf("deferred connect: fd state %d, want MANAGED", h.FDState(cfd))
	}
	t.Cleanup(func() { closeHooked(p, h, cfd) })
	return cfd
}

// acceptGroup accepts on the group listener lfd through the hook: the fd
// stays CANDIDATE.
func acceptGroup(t *testing.T, p *Process, h *fakeHost, lfd int) int {
	t.Helper()
	return acceptGroupAs(t, p, h, lfd, FDCandidate)
}

// acceptGroupAs accepts on the group listener lfd and wants state want:
// CANDIDATE for a connector's deferred connection, UNMANAGED for one
// without a usable record.
func acceptGroupAs(t *testing.T, p *Process, h *fakeHost, lfd int, want FDState) int {
	t.Helper()
	afd, sa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := addrPortOf(sa)
	st := p.Accept(lfd, afd, peer, 0)
	if st != want {
		t.Fatalf("accept on a group listener: state %d, want %d", st, want)
	}
	h.SetFDState(afd, st)
	return afd
}

func closeHooked(p *Process, h *fakeHost, fd int) {
	if h.FDState(fd) != FDUnmanaged {
		p.Close(fd)
		h.SetFDState(fd, FDUnmanaged)
	}
	unix.Close(fd)
}

// hookRead reads up to len(buf) bytes from blocking fd as the interposer
// does: through the hook while fd is CANDIDATE or MANAGED (sleeping as a
// WaitResult asks), from the kernel when it passes or fd is plain.
func hookRead(p *Process, h *fakeHost, fd int, buf []byte) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st := h.FDState(fd); st == FDCandidate || st == FDManaged {
			var w Wait
			r := p.Recv(fd, buf, 0, &w)
			switch {
			case r == WaitResult:
				hookSleep(&w)
				continue
			case r == -int64(unix.EAGAIN):
				time.Sleep(time.Millisecond)
				continue
			case r == Pass:
			case r < 0:
				return 0, unix.Errno(-r)
			default:
				return int(r), nil
			}
		}
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100); n <= 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
	return 0, errors.New("read: nothing after 10 s")
}

// hookWrite writes all of b to blocking fd as the interposer does.
func hookWrite(p *Process, h *fakeHost, fd int, b []byte) error {
	deadline := time.Now().Add(10 * time.Second)
	for len(b) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("write: %d bytes unsent after 10 s", len(b))
		}
		if st := h.FDState(fd); st == FDCandidate || st == FDManaged {
			var w Wait
			r := p.Send(fd, b, 0, &w)
			b = b[w.Done:]
			switch {
			case r == WaitResult:
				hookSleep(&w)
				continue
			case r == -int64(unix.EAGAIN):
				time.Sleep(time.Millisecond)
				continue
			case r == Pass:
			case r < 0:
				return unix.Errno(-r)
			default:
				b = b[r:]
				continue
			}
		}
		n, err := unix.Write(fd, b)
		if err == unix.EAGAIN {
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, 100)
		} else if err != nil && err != unix.EINTR {
			return err
		}
		b = b[max(n, 0):]
	}
	return nil
}

func hookSleep(w *Wait) {
	switch w.Kind {
	case WaitFutex:
		ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w.Word)), 0, uintptr(w.Val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	case WaitFD:
		unix.Poll([]unix.PollFd{{Fd: w.FD, Events: w.Events}}, 100)
	}
}

// readFull reads exactly n bytes.
func readFull(p *Process, h *fakeHost, fd, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	for len(out) < n {
		k, err := hookRead(p, h, fd, buf[:min(len(buf), n-len(out))])
		if err != nil {
			return out, err
		}
		if k == 0 {
			return out, fmt.Errorf("EOF after %d of %d bytes", len(out), n)
		}
		out = append(out, buf[:k]...)
	}
	return out, nil
}

// echo reads n bytes from fd and writes each chunk back.
func echo(p *Process, h *fakeHost, fd, n int) error {
	buf := make([]byte, 64<<10)
	for n > 0 {
		k, err := hookRead(p, h, fd, buf[:min(len(buf), n)])
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("EOF with %d bytes to go", n)
		}
		if err := hookWrite(p, h, fd, buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// exchange writes early (before anyone uses the accepted side), then
// more, on cfd, and reads both back (the peer echoes), byte-exact.
func exchange(t *testing.T, p *Process, h *fakeHost, cfd int, early, more []byte) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- hookWrite(p, h, cfd, more) }()
	got, err := readFull(p, h, cfd, len(early)+len(more))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(append([]byte(nil), early...), more...)) {
		t.Fatal("echoed bytes differ")
	}
}

// groupSetup returns a Process on a coreHost with run directory dir (it
// exits with the test) and a group listener of it, fd and address.
func groupSetup(t *testing.T, dir string) (*Process, *fakeHost, int, netip.AddrPort) {
	t.Helper()
	p, h, err := newGroupProcess(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Exit)
	lfd, addr := groupListener(t, p, h)
	return p, h, lfd, addr
}

// connectEarly connects a new socket of p to addr (deferred) and writes
// early on it: into the early buffer, before anyone accepts.
func connectEarly(t *testing.T, p *Process, h *fakeHost, addr netip.AddrPort, early []byte) int {
	t.Helper()
	cfd := deferredConnect(t, p, h, addr)
	if err := hookWrite(p, h, cfd, early); err != nil {
		t.Fatal(err)
	}
	return cfd
}

// echoExchange runs exchange on cfd while afd, in this process, echoes.
func echoExchange(t *testing.T, p *Process, h *fakeHost, cfd, afd int, early, more []byte) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- echo(p, h, afd, len(early)+len(more)) }()
	exchange(t, p, h, cfd, early, more)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestDeferredFirstUseInAcceptor(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	for i := range 3 {
		early := randomBytes(1000+i, int64(i))
		cfd := connectEarly(t, p, h, addr, early)
		afd := acceptGroup(t, p, h, lfd)
		echoExchange(t, p, h, cfd, afd, early, randomBytes(300<<10, int64(i+10)))
		if h.FDState(afd) != FDManaged || h.FDState(cfd) != FDManaged {
			t.Fatalf("states %d/%d, want both MANAGED (accelerated)", h.FDState(cfd), h.FDState(afd))
		}
		closeHooked(p, h, afd)
	}
	if c := p.Counters(); c["accept.pulled"] != 3 {
		t.Fatalf("accept.pulled %d, want 3", c["accept.pulled"])
	}
}

// A second process (a fork child with its own core, here: an fd passed by
// SCM_RIGHTS) is the first user: it pulls and the connection is
// accelerated between the connector and it.
func TestDeferredFirstUseInOtherProcess(t *testing.T) {
	for _, role := range []string{"echo", "dupecho"} {
		t.Run(role, func(t *testing.T) { testFirstUseInOtherProcess(t, role) })
	}
}

func testFirstUseInOtherProcess(t *testing.T, role string) {
	dir := t.TempDir() + "/run"
	p, h, lfd, addr := groupSetup(t, dir)
	early := randomBytes(5000, 1)
	more := randomBytes(1<<20, 2)
	// The child starts first: its start-up (a test binary, under the race
	// detector) must not eat the deferral deadline, which runs from the
	// accept.
	child := startDeferredRole(t, role, dir, -1, strconv.Itoa(len(early)+len(more)))
	cfd := connectEarly(t, p, h, addr, early)
	afd := acceptGroup(t, p, h, lfd)
	if err := unix.Sendmsg(child.ctl, []byte{'F'}, unix.UnixRights(afd), nil, 0); err != nil {
		t.Fatal(err)
	}
	closeHooked(p, h, afd) // the acceptor never uses it
	exchange(t, p, h, cfd, early, more)
	if st := child.result(t); st != "accelerated" {
		t.Fatalf("first user: %s", st)
	}
	if h.FDState(cfd) != FDManaged {
		t.Fatal("connector not accelerated")
	}
}

// Nobody uses the accepted fd within the deadline: the connector falls
// back (its early bytes onto TCP); the late first user gets plain TCP.
func TestDeferredDeadlineFallback(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	early := randomBytes(20000, 3)
	cfd := connectEarly(t, p, h, addr, early)
	afd := acceptGroup(t, p, h, lfd)
	t.Cleanup(func() { closeHooked(p, h, afd) })
	node, _ := p.rendezvousNode()
	local, _ := sockName(afd)
	remote := peerName(afd)
	rec, err := node.FindDeferred(local, remote)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, h, cfd, FDUnmanaged) // the deadline passed
	if h.fallbacks[int(rendezvous.ReasonDeferredUnclaimed)] != 1 {
		t.Fatalf("fallbacks %v, want one deferred-unclaimed", h.fallbacks)
	}
	// A PULL now is refused: the connector decided.
	if _, err := node.Pull(rec, local, remote, time.Now().Add(rendezvous.PullWait)); rendezvous.ReasonOf(err) != rendezvous.ReasonDeferredUnclaimed {
		t.Fatalf("late pull: %v", err)
	}
	echoExchange(t, p, h, cfd, afd, early, randomBytes(200<<10, 4))
	if h.FDState(afd) != FDUnmanaged {
		t.Fatal("late first user not plain")
	}
}

// A nonblocking connector (poll for the connect, writes into the early
// buffer) and an acceptor whose first use is epoll_ctl: the entry is
// emulated on the accelerated stream.
func TestDeferredNonblockingEpoll(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.SetFDState(cfd, p.SocketCreated(cfd, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK))
	t.Cleanup(func() { closeHooked(p, h, cfd) })
	if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 && r != -int64(unix.EINPROGRESS) {
		t.Fatalf("connect: %d", r)
	}
	fds := []unix.PollFd{{Fd: int32(cfd), Events: unix.POLLOUT}}
	for end := time.Now().Add(10 * time.Second); ; {
		wait := make([]unix.PollFd, 8)
		if ready, _ := p.Poll(fds, wait, -1); ready == 1 && fds[0].Revents&unix.POLLOUT != 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("deferred connect never writable")
		}
		time.Sleep(time.Millisecond)
	}
	early := randomBytes(9000, 7)
	if err := hookWrite(p, h, cfd, early); err != nil {
		t.Fatal(err)
	}
	afd, sa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := addrPortOf(sa)
	h.SetFDState(afd, p.Accept(lfd, afd, peer, unix.SOCK_NONBLOCK))
	t.Cleanup(func() { closeHooked(p, h, afd) })
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHooked(p, h, epfd) })
	if r := p.EpollCtl(epfd, unix.EPOLL_CTL_ADD, afd, unix.EPOLLIN, 7); r != 0 {
		t.Fatalf("epoll_ctl: %d", r)
	}
	if h.FDState(afd) != FDManaged || h.FDState(epfd) != FDManaged {
		t.Fatalf("after epoll_ctl: fd state %d, epoll fd %d; want both MANAGED", h.FDState(afd), h.FDState(epfd))
	}
	echoExchange(t, p, h, cfd, afd, early, randomBytes(100<<10, 8))
	if h.FDState(cfd) != FDManaged {
		t.Fatal("connector not accelerated")
	}
}

// The accepted fd is duplicated (inetd style) and the original closed
// before the first use: the copy pulls, the connection is accelerated.
func TestDeferredDupBeforeUse(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	early := randomBytes(100, 11)
	cfd := connectEarly(t, p, h, addr, early)
	afd := acceptGroup(t, p, h, lfd)
	dfd, err := unix.Dup(afd)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Dup(afd, dfd); st != FDCandidate {
		t.Fatalf("dup of an undecided socket: state %d, want CANDIDATE", st)
	}
	h.SetFDState(dfd, FDCandidate)
	t.Cleanup(func() { closeHooked(p, h, dfd) })
	closeHooked(p, h, afd)
	echoExchange(t, p, h, cfd, dfd, early, randomBytes(64<<10, 12))
	if h.FDState(dfd) != FDManaged || h.FDState(cfd) != FDManaged {
		t.Fatalf("states %d/%d, want both MANAGED", h.FDState(cfd), h.FDState(dfd))
	}
}

// A garbage record (hostile, or damaged) means plain TCP for the first
// user; the connector falls back at its deadline; bytes exact.
func TestDeferredGarbageRecord(t *testing.T) {
	dir := t.TempDir() + "/run"
	p, h, lfd, addr := groupSetup(t, dir)
	early := randomBytes(777, 9)
	cfd := connectEarly(t, p, h, addr, early)
	names, _ := os.ReadDir(dir + "/records")
	n := 0
	for _, e := range names {
		if strings.HasPrefix(e.Name(), "d") {
			if err := os.WriteFile(dir+"/records/"+e.Name(), []byte("sdpshim-deferred 1\npid 1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d record files, want 1", n)
	}
	afd := acceptGroupAs(t, p, h, lfd, FDUnmanaged) // decided at the accept
	t.Cleanup(func() { closeHooked(p, h, afd) })
	echoExchange(t, p, h, cfd, afd, early, randomBytes(50<<10, 10))
	if h.FDState(afd) != FDUnmanaged || h.fallbacks[int(rendezvous.ReasonProtocol)] != 1 {
		t.Fatalf("first user: state %d, fallbacks %v; want plain, one protocol-error", h.FDState(afd), h.fallbacks)
	}
}

// The acceptor speaks first on kernel TCP (it does not run the shim): the
// connector falls back at once, bytes exact both ways.
func TestDeferredAcceptorPlain(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	early := []byte("client hello")
	cfd := connectEarly(t, p, h, addr, early)
	afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC) // no hook: a plain acceptor
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(afd)
	greeting := []byte("220 server ready\r\n")
	if _, err := unix.Write(afd, greeting); err != nil {
		t.Fatal(err)
	}
	got, err := readFull(p, h, cfd, len(greeting))
	if err != nil || !bytes.Equal(got, greeting) {
		t.Fatalf("connector read %q, %v", got, err)
	}
	if h.FDState(cfd) != FDUnmanaged || h.fallbacks[int(rendezvous.ReasonDeferredPlain)] != 1 {
		t.Fatalf("connector state %d, fallbacks %v; want plain, deferred-acceptor-plain", h.FDState(cfd), h.fallbacks)
	}
	buf := make([]byte, 100)
	unix.Poll([]unix.PollFd{{Fd: int32(afd), Events: unix.POLLIN}}, 5000)
	if n, _ := unix.Read(afd, buf); !bytes.Equal(buf[:max(n, 0)], early) {
		t.Fatalf("acceptor read %q, want the early bytes", buf[:max(n, 0)])
	}
}

// The connector dies while deferred: the first user finds a dead record
// and gets plain TCP: the bytes the connector's send returned for (on the
// kernel socket, early.go), then EOF, as kernel TCP gives; no hang.
func TestDeferredConnectorKilled(t *testing.T) {
	dir := t.TempDir() + "/run"
	p, h, lfd, addr := groupSetup(t, dir)
	child := startDeferredRole(t, "connect", dir, -1, addr.String())
	if st := child.line(t); st != "deferred" {
		t.Fatalf("connector: %s", st)
	}
	afd := acceptGroup(t, p, h, lfd)
	t.Cleanup(func() { closeHooked(p, h, afd) })
	child.cmd.Process.Kill()
	child.cmd.Wait()
	sent := []byte(deferredSent)
	if got, err := readFull(p, h, afd, len(sent)); err != nil || !bytes.Equal(got, sent) {
		t.Fatalf("read after the connector died: %q, %v; want %q", got, err, sent)
	}
	if n, err := hookRead(p, h, afd, make([]byte, 10)); n != 0 || err != nil {
		t.Fatalf("after its bytes: %d, %v; want EOF", n, err)
	}
	if h.FDState(afd) != FDUnmanaged || h.fallbacks[int(rendezvous.ReasonPeerGone)] != 1 {
		t.Fatalf("state %d, fallbacks %v; want plain, peer-gone", h.FDState(afd), h.fallbacks)
	}
}

// deferredSent is what the "connect" role writes before it is killed.
const deferredSent = "sent, then killed"

// The program closes a deferred connection before anyone used it: its
// early bytes still reach the acceptor, then EOF.
func TestDeferredCloseBeforeUse(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	cfd := tcpSocket(t, p, h)
	if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 {
		t.Fatalf("connect: %d", r)
	}
	early := randomBytes(3000, 5)
	if err := hookWrite(p, h, cfd, early); err != nil {
		t.Fatal(err)
	}
	closeHooked(p, h, cfd)
	// The close withdrew the record: plain from the accept on.
	afd := acceptGroupAs(t, p, h, lfd, FDUnmanaged)
	t.Cleanup(func() { closeHooked(p, h, afd) })
	got, err := readFull(p, h, afd, len(early))
	if err != nil || !bytes.Equal(got, early) {
		t.Fatalf("acceptor read %d bytes, %v", len(got), err)
	}
	if n, err := hookRead(p, h, afd, make([]byte, 10)); n != 0 || err != nil {
		t.Fatalf("after the early bytes: %d, %v; want EOF", n, err)
	}
}

func waitState(t *testing.T, h *fakeHost, fd int, want FDState) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); h.FDState(fd) != want; {
		if time.Now().After(end) {
			t.Fatalf("fd %d: state %d after 10 s, want %d", fd, h.FDState(fd), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deferredRole is a helper process; its control socket carries the fd it
// works on (SCM_RIGHTS) and its report lines.
type deferredRole struct {
	cmd  *exec.Cmd
	ctl  int
	once sync.Once
	out  bytes.Buffer
}

// startDeferredRole runs role in a helper process sharing run directory
// dir, passing fd (unless -1) and arg.
func startDeferredRole(t *testing.T, role, dir string, fd int, arg string) *deferredRole {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "ctl")
	r := &deferredRole{ctl: pair[0]}
	r.cmd = exec.Command(os.Args[0], "-test.run=^$")
	r.cmd.Env = append(os.Environ(), deferredRoleEnv+"="+role, "SDPSHIM_TEST_DIR="+dir, "SDPSHIM_TEST_ARG="+arg)
	r.cmd.ExtraFiles = []*os.File{theirs}
	r.cmd.Stderr = &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		unix.Close(r.ctl)
	})
	if fd >= 0 {
		if err := unix.Sendmsg(r.ctl, []byte{'F'}, unix.UnixRights(fd), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// line reads one report line (10 s at most).
func (r *deferredRole) line(t *testing.T) string {
	t.Helper()
	var b []byte
	one := make([]byte, 1)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(r.ctl), Events: unix.POLLIN}}, 100); n <= 0 {
			continue
		}
		if n, _ := unix.Read(r.ctl, one); n <= 0 {
			break
		} else if one[0] == '\n' {
			return string(b)
		}
		b = append(b, one[0])
	}
	t.Fatalf("helper: no report (%q so far); stderr: %s", b, r.out.String())
	return ""
}

// result reads the report line and waits for the helper's exit.
func (r *deferredRole) result(t *testing.T) string {
	t.Helper()
	s := r.line(t)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("helper: %v; stderr: %s", err, r.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not exit")
	}
	return s
}

// runDeferredRole is the helper process's main. Its control socket is fd 3.
func runDeferredRole(role string) error {
	const ctl = 3
	p, h, err := newGroupProcess(os.Getenv("SDPSHIM_TEST_DIR"))
	if err != nil {
		return err
	}
	defer p.Exit()
	report := func(s string) { unix.Write(ctl, []byte(s+"\n")) }
	arg := os.Getenv("SDPSHIM_TEST_ARG")
	switch role {
	case "echo", "dupecho":
		// The first user: the fd arrives CANDIDATE, as a fork child's
		// inherited accepted socket is.
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := unix.Recvmsg(ctl, make([]byte, 1), oob, 0)
		if err != nil {
			return err
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return fmt.Errorf("control message: %v", err)
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return fmt.Errorf("rights: %v", err)
		}
		fd := fds[0]
		h.SetFDState(fd, FDCandidate)
		if role == "dupecho" {
			// dup2 onto another number before any use: the shim adopts
			// the socket at the dup, so both numbers stay one socket.
			dfd, err := unix.Dup(fd)
			if err != nil {
				return err
			}
			if st := p.Dup(fd, dfd); st != FDCandidate {
				return fmt.Errorf("dup: state %d, want CANDIDATE", st)
			}
			h.SetFDState(dfd, FDCandidate)
			closeHooked(p, h, fd)
			fd = dfd
		}
		n, _ := strconv.Atoi(arg)
		if err := echo(p, h, fd, n); err != nil {
			return err
		}
		state := "plain"
		if h.FDState(fd) == FDManaged {
			state = "accelerated"
		}
		closeHooked(p, h, fd)
		report(state)
	case "connect":
		addr, err := netip.ParseAddrPort(arg)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		h.SetFDState(fd, p.SocketCreated(fd, unix.AF_INET, unix.SOCK_STREAM))
		if r := p.Connect(fd, rawSockaddr4(addr)); r != 0 {
			return fmt.Errorf("connect: %d", r)
		}
		if err := hookWrite(p, h, fd, []byte(deferredSent)); err != nil {
			return err
		}
		if p.fds.socket(fd) == nil || p.fds.socket(fd).getState() != sockConnecting {
			return errors.New("not deferred")
		}
		report("deferred")
		syscall.Pause() // killed by the test
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// A plain connector (no record) on a group listener: the accept decides
// at once, plain TCP, so a fork child that inherits the socket needs no
// core for it.
func TestDeferredPlainConnectorDecidedAtAccept(t *testing.T) {
	p, h, lfd, addr := groupSetup(t, t.TempDir()+"/run")
	cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(cfd) })
	if err := unix.Connect(cfd, &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		t.Fatal(err)
	}
	afd := acceptGroupAs(t, p, h, lfd, FDUnmanaged)
	t.Cleanup(func() { closeHooked(p, h, afd) })
	if h.fallbacks[int(rendezvous.ReasonNotShimmed)] != 1 {
		t.Fatalf("fallbacks %v, want one not-shimmed", h.fallbacks)
	}
	if _, err := unix.Write(cfd, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if n, err := unix.Read(afd, b); n != 4 || err != nil || string(b) != "ping" {
		t.Fatalf("kernel read: %d %v %q", n, err, b)
	}
}
