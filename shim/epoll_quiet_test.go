package shim

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// scanSet runs one zero-timeout epoll_wait on epfd as the interposer does
// (the core's scan, then the kernel's list and the core's filter) and
// returns the events by data.
func scanSet(t *testing.T, p *Process, epfd int) map[uint64]uint32 {
	t.Helper()
	ev := make([]unix.EpollEvent, 8)
	n := p.EpollWait(epfd, ev, -2, -1)
	if n == 0 {
		k, err := unix.EpollWait(epfd, ev, 0)
		if err != nil {
			t.Fatal(err)
		}
		n = p.EpollWait(epfd, ev, k, -1)
	}
	if n < 0 {
		t.Fatalf("epoll_wait: %d", n)
	}
	out := map[uint64]uint32{}
	for _, e := range ev[:n] {
		out[epollData(&e)] |= e.Events
	}
	return out
}

// scanFor scans until data reports want (all of its bits), failing after
// 10 s (an event the scans never report: lost).
func scanFor(t *testing.T, p *Process, epfd int, data uint64, want uint32) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; {
		if got := scanSet(t, p, epfd)[data]; got&want == want {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("entry %d never reported %#x", data, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// quietOf reports whether the set's entry for fd is skipped by scans
// until its socket's wake word moves.
func quietOf(p *Process, epfd, fd int) bool {
	set := p.fds.epoll(epfd)
	set.mu.Lock()
	defer set.mu.Unlock()
	e := set.entries[fd]
	return e != nil && e.quiet
}

// Scans skip entries that reported nothing while their socket's wake
// word stays, and every way an entry becomes ready again still reports
// it: data from the peer, a local shutdown, EPOLL_CTL_MOD to events that
// are ready, an edge-triggered entry's next arrival.
func TestEpollQuietEntries(t *testing.T) {
	for _, mode := range []string{"shared", "direct"} {
		t.Run(mode, func(t *testing.T) { testEpollQuietEntries(t, mode) })
	}
}

func testEpollQuietEntries(t *testing.T, mode string) {
	p, h := newProcess(t, "SDPSHIM_CHANNEL="+mode)

	c, a := pair(t, p, h)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHooked(p, h, epfd) })
	if r := p.EpollCtl(epfd, unix.EPOLL_CTL_ADD, a, unix.EPOLLIN|unix.EPOLLRDHUP, 1); r != 0 {
		t.Fatalf("epoll_ctl add a: %d", r)
	}
	if r := p.EpollCtl(epfd, unix.EPOLL_CTL_ADD, c, unix.EPOLLIN, 2); r != 0 {
		t.Fatalf("epoll_ctl add c: %d", r)
	}
	if got := scanSet(t, p, epfd); len(got) != 0 {
		t.Fatalf("idle set reports %v", got)
	}
	if !quietOf(p, epfd, a) || !quietOf(p, epfd, c) {
		t.Fatal("entries that reported nothing are not quiet")
	}
	if got := scanSet(t, p, epfd); len(got) != 0 {
		t.Fatalf("idle set reports %v at its second scan", got)
	}

	// Data from the peer; level-triggered: reported at every scan until read.
	sendAll(t, p, h, c, []byte("hello"))
	scanFor(t, p, epfd, 1, unix.EPOLLIN)
	if got := scanSet(t, p, epfd)[1]; got&unix.EPOLLIN == 0 {
		t.Fatalf("unread data not reported again (level-triggered): %#x", got)
	}
	if string(recvAll(t, p, h, a, 5)) != "hello" {
		t.Fatal("wrong bytes")
	}
	for end := time.Now().Add(10 * time.Second); !quietOf(p, epfd, a); {
		got := scanSet(t, p, epfd)[1]
		if time.Now().After(end) {
			t.Fatalf("socket read empty never quiet (reports %#x)", got)
		}
	}

	// A local shutdown makes the quiet entry ready.
	if r := p.Shutdown(a, unix.SHUT_RD); r != 0 {
		t.Fatalf("shutdown: %d", r)
	}
	scanFor(t, p, epfd, 1, unix.EPOLLIN|unix.EPOLLRDHUP)

	// EPOLL_CTL_MOD to events that are ready: reported at once.
	if !quietOf(p, epfd, c) {
		t.Fatal("c not quiet")
	}
	if r := p.EpollCtl(epfd, unix.EPOLL_CTL_MOD, c, unix.EPOLLOUT, 2); r != 0 {
		t.Fatalf("epoll_ctl mod: %d", r)
	}
	if got := scanSet(t, p, epfd)[2]; got&unix.EPOLLOUT == 0 {
		t.Fatalf("writable socket after MOD reports %#x, want EPOLLOUT", got)
	}

	// Edge-triggered: one report per arrival, the quiet entry included.
	if r := p.EpollCtl(epfd, unix.EPOLL_CTL_MOD, c, unix.EPOLLIN|unix.EPOLLET, 2); r != 0 {
		t.Fatalf("epoll_ctl mod: %d", r)
	}
	for round := 0; round < 3; round++ {
		sendAll(t, p, h, a, []byte("x"))
		scanFor(t, p, epfd, 2, unix.EPOLLIN)
		if got := scanSet(t, p, epfd)[2]; got != 0 {
			t.Fatalf("round %d: edge-triggered entry reported again without an arrival: %#x", round, got)
		}
		if !quietOf(p, epfd, c) {
			t.Fatalf("round %d: edge-triggered entry with nothing new is not quiet", round)
		}
	}
}
