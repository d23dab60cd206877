package shim

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// probeHost is a fakeHost that records the probes fired (a shim.Observer).
type probeHost struct {
	*fakeHost
	mu          sync.Mutex
	fallbacks   [][3]uint64 // reason, fd, cookie
	accelerated [][3]uint64
	interposer  map[int]uint64
}

func (h *probeHost) ProbeFallback(reason, fd int, cookie uint64) {
	h.mu.Lock()
	h.fallbacks = append(h.fallbacks, [3]uint64{uint64(reason), uint64(fd), cookie})
	h.mu.Unlock()
}

func (h *probeHost) ProbeAccelerated(t, fd int, cookie uint64) {
	h.mu.Lock()
	h.accelerated = append(h.accelerated, [3]uint64{uint64(t), uint64(fd), cookie})
	h.mu.Unlock()
}

func (h *probeHost) InterposerFallbacks(code int) uint64 { return h.interposer[code] }

func newObservedProcess(t *testing.T, env ...string) (*Process, *probeHost, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdpsh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &probeHost{fakeHost: newFakeHost(), interposer: map[int]uint64{71: 2}}
	rd := filepath.Join(dir, "run")
	p, reason := Init(h, testEnv(append([]string{"SDPSHIM_RUNDIR=" + rd}, env...)))
	if p == nil {
		t.Fatalf("Init declined: reason %d", reason)
	}
	t.Cleanup(p.Exit)
	return p, h, rd
}

// The registry sees an accelerated pair (both ends, bytes and messages
// each way, not peeks), its channel and waiters, the accelerated probe
// with the sockets' cookies; closing moves the counts into the totals.
// The stats socket serves the same registry.
func TestStatsAcceleratedPair(t *testing.T) {
	p, h, rd := newObservedProcess(t, "SDPSHIM_CHANNEL=shared")
	c, a := pair(t, p, h.fakeHost)
	send := func(fd int, b []byte) int64 {
		return call(t, func(done int, w *Wait) int64 { return p.Send(fd, b[done:], 0, w) })
	}
	recv := func(fd int, b []byte, flags int) int64 {
		return call(t, func(done int, w *Wait) int64 { return p.Recv(fd, b[done:], flags, w) })
	}
	const big = 1 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), big/16)
	sent := make(chan int64, 1)
	go func() { sent <- send(c, data) }()
	got := make([]byte, big)
	recv(a, got[:4], unix.MSG_PEEK)
	if n := recv(a, got, unix.MSG_WAITALL); n != big {
		t.Fatalf("recv %d", n)
	}
	send(a, []byte("ok"))
	recv(c, got[:2], unix.MSG_WAITALL)
	// The send counts its bytes when it returns, which may come after
	// the peer has read them all.
	if n := <-sent; n != big {
		t.Fatalf("send %d", n)
	}

	s := p.Stats().Snapshot()
	if len(s.Connections) != 2 || s.Totals.Accelerated != 2 || s.Totals.Fallbacks != 2 {
		t.Fatalf("connections %+v totals %+v: want two accelerated, the interposer's 2 fallbacks", s.Connections, s.Totals)
	}
	byFD := map[int]stats.ConnStats{}
	for _, cs := range s.Connections {
		byFD[cs.FD] = cs
		if cs.Transport != "shm" || cs.Cookie != socketCookie(cs.FD) || cs.Cookie == 0 || cs.PeerPID != os.Getpid() || cs.Channel == 0 || cs.FlowStats == nil {
			t.Errorf("connection %+v", cs)
		}
	}
	if cs := byFD[a]; cs.BytesReceived != big || cs.BytesSent != 2 || cs.MessagesSent != 1 {
		t.Errorf("acceptor: %+v, want %d bytes received (peek not counted), 2 sent in 1 message", cs, big)
	}
	if cs := byFD[c]; cs.BytesSent != big || cs.BytesReceived != 2 || cs.MessagesReceived != 1 {
		t.Errorf("connector: %+v, want %d bytes sent, 2 received in 1 message", cs, big)
	}
	if len(s.Channels) == 0 || s.Channels[0].BlocksReceived == 0 {
		t.Errorf("channels %+v", s.Channels)
	}
	if len(s.Waiters) != 5 { // poll, and read/write of each connection
		t.Errorf("waiters %+v", s.Waiters)
	}
	if len(h.accelerated) != 2 || h.accelerated[0][0] != uint64(stats.TransportSHM) {
		t.Errorf("accelerated probes %v", h.accelerated)
	}
	if got := p.Counters()["fallback.core-busy"]; got != 2 {
		t.Errorf("interposer's core-busy count %d, want 2 (read through the host)", got)
	}

	served, err := stats.List(rd)
	if err != nil || len(served) != 1 || served[0].PID != os.Getpid() {
		t.Fatalf("stats sockets %v (%v)", served, err)
	}
	if fs, err := stats.Fetch(served[0].Path, 2*time.Second); err != nil || len(fs.Connections) != 2 {
		t.Fatalf("fetched %+v (%v)", fs, err)
	}

	p.Close(a)
	p.Close(c)
	s = p.Stats().Snapshot()
	if len(s.Connections) != 0 || s.Totals.BytesSent != big+2 || s.Totals.BytesReceived != big+2 || len(s.Waiters) != 1 {
		t.Errorf("after close: connections %d, totals %+v, waiters %d", len(s.Connections), s.Totals, len(s.Waiters))
	}
}

// A direct pair reports as shm connections with the direct flow and no
// channel; the counts include the calls the core made itself, and close
// keeps them in the totals.
func TestStatsDirectPair(t *testing.T) {
	p, h, _ := newObservedProcess(t, "SDPSHIM_CHANNEL=direct")
	c, a := pair(t, p, h.fakeHost)
	send := func(fd int, b []byte) int64 {
		return call(t, func(done int, w *Wait) int64 { return p.Send(fd, b[done:], 0, w) })
	}
	recv := func(fd int, b []byte) int64 {
		return call(t, func(done int, w *Wait) int64 { return p.Recv(fd, b[done:], unix.MSG_WAITALL, w) })
	}
	const big = 1 << 20
	sent := make(chan int64, 1)
	go func() { sent <- send(c, bytes.Repeat([]byte("x"), big)) }()
	if n := recv(a, make([]byte, big)); n != big {
		t.Fatalf("recv %d", n)
	}
	if n := <-sent; n != big { // counted when the call returns
		t.Fatalf("send %d", n)
	}
	s := p.Stats().Snapshot()
	if len(s.Connections) != 2 || len(s.Channels) != 0 {
		t.Fatalf("connections %+v channels %+v", s.Connections, s.Channels)
	}
	for _, cs := range s.Connections {
		if cs.Transport != "shm" || cs.Flow != "direct" || cs.PeerPID != os.Getpid() {
			t.Errorf("connection %+v", cs)
		}
		if cs.FD == a && cs.BytesReceived != big || cs.FD == c && cs.BytesSent != big {
			t.Errorf("counts %+v", cs)
		}
	}
	// Each handle's waits (the interposer's: none here, where the core
	// made every call) are a waiter of their own.
	handles := 0
	for _, w := range s.Waiters {
		if strings.HasSuffix(w.Name, ".direct") {
			handles++
			if w.PollHits+w.Sleeps != w.Waits {
				t.Errorf("waiter %+v: hits and sleeps do not add up to its waits", w)
			}
		}
	}
	if handles != 2 {
		t.Errorf("%d direct waiters, want one per connection: %+v", handles, s.Waiters)
	}
	p.Close(a)
	p.Close(c)
	if s := p.Stats().Snapshot(); s.Totals.BytesSent != big || s.Totals.BytesReceived != big {
		t.Errorf("totals after close %+v", s.Totals)
	}
}

// plainListener returns the address of a kernel TCP listener the shim
// does not know (closed with the test).
func plainListener(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(l) })
	if err := unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 4); err != nil {
		t.Fatal(err)
	}
	addr, err := sockName(l)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// A fallback is counted once, by reason, with the socket's cookie and
// peer, and fires the fallback probe; with SDPSHIM_STATS=0 no socket is
// served but counting goes on.
func TestStatsFallbackProbe(t *testing.T) {
	p, h, rd := newObservedProcess(t, "SDPSHIM_STATS=0")
	addr := plainListener(t)
	c := tcpSocket(t, p, h.fakeHost)
	defer unix.Close(c)
	if r := p.Connect(c, rawSockaddr4(addr)); r != Pass {
		t.Fatalf("connect to a plain listener: %d", r)
	}
	if len(h.fallbacks) != 1 || h.fallbacks[0] != [3]uint64{1, uint64(c), socketCookie(c)} || h.fallbacks[0][2] == 0 {
		t.Errorf("fallback probes %v, want one peer-not-shimmed with fd %d and its cookie", h.fallbacks, c)
	}
	s := p.Stats().Snapshot()
	if len(s.RecentFallbacks) != 1 || s.RecentFallbacks[0].Peer != addr.String() || p.Counters()["fallback.peer-not-shimmed"] != 1 {
		t.Errorf("recent %+v counters %v", s.RecentFallbacks, p.Counters())
	}
	if served, _ := stats.List(rd); len(served) != 0 {
		t.Errorf("SDPSHIM_STATS=0 serves %v", served)
	}
}

// A listener that is not registered (excluded by rule) leaves its
// accepted connections on kernel TCP, each counted with that reason.
func TestStatsUnregisteredListenerCounts(t *testing.T) {
	p, h, _ := newObservedProcess(t, "SDPSHIM_EXCLUDE=127.0.0.1")
	l := tcpSocket(t, p, h.fakeHost)
	defer unix.Close(l)
	unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if r := p.Listen(l, 4); r != 0 {
		t.Fatalf("listen: %d", r)
	}
	addr, _ := sockName(l)
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c)
	if err := unix.Connect(c, &unix.SockaddrInet4{Addr: addr.Addr().As4(), Port: int(addr.Port())}); err != nil {
		t.Fatal(err)
	}
	fd, sa, err := unix.Accept(l)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	peer, _ := addrPortOf(sa)
	if st := p.Accept(l, fd, peer, 0); st != FDUnmanaged {
		t.Fatalf("accept state %d", st)
	}
	if got := p.Counters()["fallback.excluded-by-rule"]; got != 1 || len(h.fallbacks) != 1 || h.fallbacks[0][1] != uint64(fd) {
		t.Errorf("excluded-by-rule count %d, probes %v", got, h.fallbacks)
	}
}
