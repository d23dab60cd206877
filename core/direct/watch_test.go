package direct

import (
	"testing"

	"golang.org/x/sys/unix"
)

// watchPair is a pair of connected TCP sockets on loopback: the kernel
// connection beside an area, as the switch watcher sees it.
func watchPair(t *testing.T) (int, int) {
	t.Helper()
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l)
	if err := unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 1); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(c, sa); err != nil {
		t.Fatal(err)
	}
	a, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

// watched reports the ids of the events the set epfd has now.
func watched(t *testing.T, epfd int) []int32 {
	t.Helper()
	evs := make([]unix.EpollEvent, 4)
	n, err := unix.EpollWait(epfd, evs, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, e := range evs[:n] {
		ids = append(ids, e.Fd)
	}
	return ids
}

// TestWatchLater checks the switch watcher's lazy registration: nothing
// is added until a sleep needs it, so the peer's FIN wakes nobody; a
// sleep (or WatchNow) adds the socket once, and an end already there
// fires at the add; WatchTake says whether the caller must remove it.
func TestWatchLater(t *testing.T) {
	for _, how := range []string{"sleep", "arm", "now", "never"} {
		t.Run(how, func(t *testing.T) {
			_, b := pair(t, 4, 256)
			mine, theirs := watchPair(t)
			defer unix.Close(mine)
			epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(epfd)
			b.SetRing(mine)
			defer b.SetRing(-1)
			if !b.WatchLater(epfd, 7) {
				t.Fatal("WatchLater on a fresh handle: false")
			}
			// The peer's end before any sleep: not in the set, nothing fires.
			unix.Shutdown(theirs, unix.SHUT_WR)
			defer unix.Close(theirs)
			if ids := watched(t, epfd); len(ids) != 0 {
				t.Fatalf("events before a sleep: %v", ids)
			}
			switch how {
			case "sleep":
				sl := b.PrepareSleep(false)
				if sl == nil {
					t.Fatal("no sleep with nothing to read")
				}
				b.Woke(sl)
			case "arm":
				b.Arm(unix.POLLIN, 0)
			case "now":
				b.WatchNow()
			}
			ids := watched(t, epfd)
			if how == "never" {
				if len(ids) != 0 || b.WatchTake() {
					t.Fatalf("never slept: events %v, or taken as added", ids)
				}
				return
			}
			if len(ids) != 1 || ids[0] != 7 {
				t.Fatalf("after the %s: events %v, want [7]", how, ids)
			}
			if b.WatchLater(epfd, 7) {
				t.Fatal("WatchLater once added: true (the caller must arm it again)")
			}
			b.WatchNow() // added already: no second add
			if !b.WatchTake() {
				t.Fatal("WatchTake: not added")
			}
			if b.WatchTake() {
				t.Fatal("WatchTake twice: added")
			}
		})
	}
}
