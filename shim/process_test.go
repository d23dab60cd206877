package shim

import (
	"bytes"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/sdpshim/sdpshim/shim/config"
	"golang.org/x/sys/unix"
)

// These tests drive the hooks the way the interposer does, in one process
// (which connects to itself), with a fake host table and real kernel
// sockets, channels and rendezvous: connect, accept, the data path with
// its kernel sleeps, poll, shutdown and close.

// fakeHost is the interposer's table.
type fakeHost struct {
	mu        sync.Mutex
	st        map[int]FDState
	fallbacks map[int]int
}

func newFakeHost() *fakeHost {
	return &fakeHost{st: map[int]FDState{}, fallbacks: map[int]int{}}
}

func (h *fakeHost) FDState(fd int) FDState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st[fd]
}

func (h *fakeHost) SetFDState(fd int, st FDState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st[fd] = st
	return nil
}

func (h *fakeHost) CountFallback(r int) {
	h.mu.Lock()
	h.fallbacks[r]++
	h.mu.Unlock()
}

// call runs a hook like the interposer: it sleeps as a WaitResult asks
// (at most 10 s in all, then fails) and calls again for what is left.
func call(t *testing.T, hook func(done int, w *Wait) int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	done := 0
	for {
		var w Wait
		r := hook(done, &w)
		if r != WaitResult {
			if r >= 0 {
				return int64(done) + r
			}
			if done > 0 {
				return int64(done)
			}
			return r
		}
		done += int(w.Done)
		if time.Now().After(deadline) {
			t.Fatal("hook still waiting after 10 s")
		}
		switch w.Kind {
		case WaitFutex:
			ts := unix.NsecToTimespec(int64(100 * time.Millisecond)) // a test never sleeps for ever
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w.Word)), 0, uintptr(w.Val), uintptr(unsafe.Pointer(&ts)), 0, 0)
		case WaitFD:
			unix.Poll([]unix.PollFd{{Fd: w.FD, Events: w.Events}}, 100)
		default:
			t.Fatalf("wait kind %d", w.Kind)
		}
	}
}

// pair makes an accelerated connection of p to itself.
func pair(t *testing.T, p *Process, h *fakeHost) (cfd, afd int) {
	t.Helper()
	lfd, cfd := listenConnect(t, p, h)
	afd = acceptOne(t, p, h, lfd)
	t.Cleanup(func() {
		for _, fd := range []int{lfd, cfd, afd} {
			if h.FDState(fd) != FDUnmanaged {
				p.Close(fd)
			}
			unix.Close(fd)
		}
	})
	return cfd, afd
}

// listenConnect makes a registered listener of p and connects to it; the
// connection's verdict is pending until acceptOne (the caller closes both).
func listenConnect(t *testing.T, p *Process, h *fakeHost) (lfd, cfd int) {
	t.Helper()
	lfd = tcpSocket(t, p, h)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if r := p.Listen(lfd, 8); r != 0 {
		t.Fatalf("listen: %d", r)
	}
	addr, _ := sockName(lfd)
	cfd = tcpSocket(t, p, h)
	if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 {
		t.Fatalf("connect: %d", r)
	}
	if h.FDState(cfd) != FDManaged {
		t.Fatalf("connected socket is %d, want MANAGED", h.FDState(cfd))
	}
	return lfd, cfd
}

// acceptOne accepts the next connection on lfd and claims it.
func acceptOne(t *testing.T, p *Process, h *fakeHost, lfd int) int {
	t.Helper()
	afd, sa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := addrPortOf(sa)
	if st := p.Accept(lfd, afd, peer, 0); st != FDManaged {
		t.Fatalf("accept: state %d, want MANAGED", st)
	}
	h.SetFDState(afd, FDManaged)
	return afd
}

func tcpSocket(t *testing.T, p *Process, h *fakeHost) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.SetFDState(fd, p.SocketCreated(fd, unix.AF_INET, unix.SOCK_STREAM))
	return fd
}

func rawSockaddr4(ap netip.AddrPort) []byte {
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().As4()}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(ap.Port()>>8), byte(ap.Port())
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)...)
}

func newProcess(t *testing.T, env ...string) (*Process, *fakeHost) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdpsh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := newFakeHost()
	p, reason := Init(h, testEnv(append([]string{"SDPSHIM_RUNDIR=" + dir + "/run"}, env...)))
	if p == nil {
		t.Fatalf("Init declined: reason %d", reason)
	}
	t.Cleanup(p.Exit)
	return p, h
}

// testEnv is env with SDPSHIM_SHORT_CONN=0 unless env sets it: the tests
// make many short connections in one process and expect each to be
// accelerated; the short-lived policy has tests of its own.
func testEnv(env []string) []string {
	if _, set := config.Getenv(env, "SDPSHIM_SHORT_CONN"); set {
		return env
	}
	return append(env, "SDPSHIM_SHORT_CONN=0")
}

func TestSelfConnectDataPath(t *testing.T) {
	for _, env := range [][]string{nil, {"SDPSHIM_FLOW=credit"}, {"SDPSHIM_POLL=event"}, {"SDPSHIM_TRANSPORT=slidingwindow"}} {
		t.Run(fmtEnv(env), func(t *testing.T) {
			p, h := newProcess(t, env...)
			c, a := pair(t, p, h)
			send := func(fd int, b []byte, flags int) int64 {
				return call(t, func(done int, w *Wait) int64 { return p.Send(fd, b[done:], flags, w) })
			}
			recv := func(fd int, b []byte, flags int) int64 {
				return call(t, func(done int, w *Wait) int64 { return p.Recv(fd, b[done:], flags, w) })
			}
			if n := send(c, []byte("hello"), 0); n != 5 {
				t.Fatalf("send: %d", n)
			}
			buf := make([]byte, 16)
			if n := recv(a, buf[:3], unix.MSG_PEEK); n != 3 || string(buf[:3]) != "hel" {
				t.Fatalf("peek: %d %q", n, buf[:3])
			}
			if n := recv(a, buf[:5], unix.MSG_WAITALL); n != 5 || string(buf[:5]) != "hello" {
				t.Fatalf("recv: %d %q", n, buf[:5])
			}
			if n := p.Recv(a, buf, unix.MSG_DONTWAIT, new(Wait)); n != -int64(unix.EAGAIN) {
				t.Fatalf("MSG_DONTWAIT with nothing there: %d", n)
			}
			// Bulk both ways at once, more than the channel holds.
			const total = 3 << 20
			data := make([]byte, total)
			for i := range data {
				data[i] = byte(i * 7)
			}
			var wg sync.WaitGroup
			for _, fd := range []int{c, a} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if n := send(fd, data, 0); n != total {
						t.Errorf("bulk send: %d", n)
					}
				}()
			}
			for _, fd := range []int{a, c} {
				got := make([]byte, total)
				if n := recv(fd, got, unix.MSG_WAITALL); n != total || !bytes.Equal(got, data) {
					t.Fatalf("bulk recv: %d bytes, equal %v", n, bytes.Equal(got, data))
				}
			}
			wg.Wait()
			// Poll: nothing to read, writable; then readable.
			fds := []unix.PollFd{{Fd: int32(a), Events: unix.POLLIN | unix.POLLOUT}}
			wait := make([]unix.PollFd, 3)
			if n, _ := p.Poll(fds, wait, -1); n != 1 || fds[0].Revents != unix.POLLOUT {
				t.Fatalf("poll idle: %d %#x", n, fds[0].Revents)
			}
			send(c, []byte("x"), 0)
			fds[0] = unix.PollFd{Fd: int32(a), Events: unix.POLLIN}
			deadline := time.Now().Add(5 * time.Second)
			for {
				n, nw := p.Poll(fds, wait, -1)
				if n == 1 && fds[0].Revents&unix.POLLIN != 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("poll never readable: %d %#x", n, fds[0].Revents)
				}
				unix.Poll(wait[:nw], 100)
			}
			recv(a, buf[:1], 0)
			// Half close, then close: EOF, then EPIPE on write.
			if r := p.Shutdown(c, unix.SHUT_WR); r != 0 {
				t.Fatalf("shutdown: %d", r)
			}
			if n := recv(a, buf, 0); n != 0 {
				t.Fatalf("read after the peer's shutdown: %d, want EOF", n)
			}
			if n := p.Send(c, []byte("z"), 0, new(Wait)); n != -int64(unix.EPIPE) {
				t.Fatalf("write after shutdown: %d, want EPIPE", n)
			}
			send(a, []byte("back"), 0)
			if n := recv(c, buf[:4], unix.MSG_WAITALL); n != 4 || string(buf[:4]) != "back" {
				t.Fatalf("read after own shutdown: %d", n)
			}
			p.Close(a)
			h.SetFDState(a, FDUnmanaged)
			if n := recv(c, buf, 0); n != 0 {
				t.Fatalf("read after the peer's close: %d, want EOF", n)
			}
		})
	}
}

func TestPlainPeerFallsBack(t *testing.T) {
	p, h := newProcess(t)
	addr := plainListener(t)
	c := tcpSocket(t, p, h)
	defer unix.Close(c)
	if r := p.Connect(c, rawSockaddr4(addr)); r != Pass {
		t.Fatalf("connect to a plain listener: %d, want Pass", r)
	}
	if h.FDState(c) != FDUnmanaged || p.fds.get(c) != nil {
		t.Fatal("fallen-back socket still tracked")
	}
	if h.fallbacks[1] != 1 { // peer-not-shimmed
		t.Fatalf("fallbacks %v, want one peer-not-shimmed", h.fallbacks)
	}
}

func TestInitDeclines(t *testing.T) {
	if p, r := Init(newFakeHost(), []string{"SDPSHIM_ENABLE=0"}); p != nil || r != ReasonShimOff {
		t.Errorf("SDPSHIM_ENABLE=0: %v %d", p, r)
	}
	if p, r := Init(newFakeHost(), []string{"SDPSHIM_BLOCKS=3x", "SDPSHIM_LOG_LEVEL=off"}); p != nil || r != 10 {
		t.Errorf("bad setting: %v %d", p, r)
	}
}

func fmtEnv(env []string) string {
	if len(env) == 0 {
		return "defaults"
	}
	return env[0]
}
