package shim

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// recvAll reads n bytes from fd as the interposer would: through the
// hook while the fd is MANAGED, from the kernel when the hook passes or
// the fd is plain.
func recvAll(t *testing.T, p *Process, h *fakeHost, fd, n int) []byte {
	t.Helper()
	out := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fd %d: %d of %d bytes after 10 s", fd, len(out), n)
		}
		want := buf[:min(len(buf), n-len(out))]
		r := int64(Pass)
		if h.FDState(fd) == FDManaged {
			var w Wait
			r = p.Recv(fd, want, unix.MSG_DONTWAIT, &w)
		}
		switch {
		case r == Pass:
			k, _, err := unix.Recvfrom(fd, want, unix.MSG_DONTWAIT)
			if k > 0 {
				out = append(out, want[:k]...)
			} else if err == nil {
				t.Fatalf("fd %d: EOF after %d of %d bytes", fd, len(out), n)
			} else {
				unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10)
			}
		case r > 0:
			out = append(out, want[:r]...)
		case r == WaitResult || r == -int64(unix.EAGAIN):
			time.Sleep(time.Millisecond)
		default:
			t.Fatalf("fd %d: recv %d", fd, r)
		}
	}
	return out
}

// sendAll writes b on fd as the interposer would.
func sendAll(t *testing.T, p *Process, h *fakeHost, fd int, b []byte) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(b) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("fd %d: %d bytes unsent after 10 s", fd, len(b))
		}
		r := int64(Pass)
		if h.FDState(fd) == FDManaged {
			var w Wait
			r = p.Send(fd, b, unix.MSG_DONTWAIT, &w)
		}
		switch {
		case r == Pass:
			k, err := unix.SendmsgN(fd, b, nil, nil, unix.MSG_DONTWAIT)
			if k > 0 {
				b = b[k:]
			} else if err != unix.EAGAIN {
				t.Fatalf("fd %d: kernel send: %v", fd, err)
			} else {
				time.Sleep(time.Millisecond)
			}
		case r > 0:
			b = b[r:]
		case r == WaitResult || r == -int64(unix.EAGAIN):
			time.Sleep(time.Millisecond)
		default:
			t.Fatalf("fd %d: send %d", fd, r)
		}
	}
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// A connection switched to kernel TCP by one end (the forker) keeps every
// byte in both directions, including what each end had received and not
// read: the forker's unread bytes come back over TCP, the responder's are
// read before the kernel's.
func TestForkSwitchKeepsUnreadBytes(t *testing.T) {
	for _, both := range []bool{false, true} {
		name := map[bool]string{false: "one-forker", true: "both-fork"}[both]
		t.Run(name, func(t *testing.T) {
			p, h := newProcess(t)
			c, a := pair(t, p, h)
			toA, toC := randomBytes(120<<10, 1), randomBytes(70<<10, 2)
			sendAll(t, p, h, c, toA[:100<<10])
			sendAll(t, p, h, a, toC[:50<<10])
			gotC := recvAll(t, p, h, c, 10<<10) // c reads a little of its part
			time.Sleep(20 * time.Millisecond)   // the rest is in the streams
			if both {
				p.ForkPrepare(ForkFork)
			} else {
				p.lookup(a).switchAsForker()
			}
			if h.FDState(a) != FDUnmanaged {
				t.Fatalf("forker's fd is %d after the switch, want UNMANAGED", h.FDState(a))
			}
			if both && h.FDState(c) != FDUnmanaged {
				t.Fatalf("second forker's fd is %d, want UNMANAGED", h.FDState(c))
			}
			// After the switch: more bytes, now on kernel TCP.
			sendAll(t, p, h, c, toA[100<<10:])
			sendAll(t, p, h, a, toC[50<<10:])
			if got := recvAll(t, p, h, a, len(toA)); !bytes.Equal(got, toA) {
				t.Fatalf("forker received wrong bytes")
			}
			gotC = append(gotC, recvAll(t, p, h, c, len(toC)-len(gotC))...)
			if !bytes.Equal(gotC, toC) {
				t.Fatalf("responder received wrong bytes")
			}
			if h.FDState(c) != FDUnmanaged {
				t.Errorf("responder's fd is %d once its tail is read, want UNMANAGED", h.FDState(c))
			}
			h.mu.Lock()
			n := h.fallbacks[coreReason(rendezvous.ReasonForkDecline)]
			h.mu.Unlock()
			if n != 2 {
				t.Errorf("%d fork-exec-decline fallbacks counted, want 2", n)
			}
		})
	}
}

// A peer that never answers (here: its watcher is gone, as in a stopped
// process) costs the fork at most switchDeadline, and the connection
// fails instead of delivering anything wrong.
func TestForkSwitchSilentPeer(t *testing.T) {
	p, h := newProcess(t)
	c, a := pair(t, p, h)
	sendAll(t, p, h, c, randomBytes(10<<10, 3))
	p.unwatchSwitch(p.lookup(c), c)
	start := time.Now()
	p.lookup(a).switchAsForker()
	if d := time.Since(start); d > switchDeadline+time.Second {
		t.Errorf("switch took %v with a silent peer, want about %v", d, switchDeadline)
	}
	if h.FDState(a) != FDUnmanaged {
		t.Fatalf("fd is %d after a failed switch, want UNMANAGED", h.FDState(a))
	}
	buf := make([]byte, 64)
	unix.Poll([]unix.PollFd{{Fd: int32(a), Events: unix.POLLIN}}, 1000)
	if n, _, err := unix.Recvfrom(a, buf, unix.MSG_DONTWAIT); n > 0 || err == unix.EAGAIN {
		t.Errorf("read on the failed connection: %d bytes, %v; want EOF or an error", n, err)
	}
}
