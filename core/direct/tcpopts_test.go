package direct

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestTCPOptsLazyHold checks that a handle's socket keeps the program's
// TCP_NODELAY and TCP_CORK until the handle's first ring on it, which
// holds them (Nagle off, cork off, the program's kept aside), that the
// program's settings are read and written aside while held and go back
// on the socket at Release, and that nothing holds them after.
func TestTCPOptsLazyHold(t *testing.T) {
	a, b := pair(t, 4, 256)
	mine, theirs := watchPair(t)
	defer unix.Close(mine)
	defer unix.Close(theirs)
	sockopt := func(name int) int {
		t.Helper()
		v, err := unix.GetsockoptInt(mine, unix.IPPROTO_TCP, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := unix.SetsockoptInt(mine, unix.IPPROTO_TCP, unix.TCP_CORK, 1); err != nil {
		t.Fatal(err)
	}
	opts := NewTCPOpts()
	b.SetTCPOpts(opts)
	b.SetRing(mine)
	defer b.SetRing(-1)
	if _, held := opts.Get(unix.TCP_NODELAY); held || sockopt(unix.TCP_NODELAY) != 0 || sockopt(unix.TCP_CORK) != 1 {
		t.Fatal("held before any ring")
	}
	// A send that no sleeper armed for rings nobody.
	if n, _, err := b.Send([]byte("x"), false); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	if _, held := opts.Get(unix.TCP_NODELAY); held {
		t.Fatal("held without a ring")
	}
	// The peer's sleeper arms with bell 0 (the socket's ring): b's next
	// publish rings on its socket, which holds the settings first.
	buf := make([]byte, 8)
	a.Recv(buf, false, true)
	a.Arm(unix.POLLIN, 0)
	if n, _, err := b.Send([]byte("y"), false); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	var ring [1]byte
	if n, err := unix.Read(theirs, ring[:]); n != 1 || err != nil {
		t.Fatalf("no ring on the socket: %d %v", n, err)
	}
	if nd, held := opts.Get(unix.TCP_NODELAY); !held || nd != 0 {
		t.Fatalf("after the ring: TCP_NODELAY %d held %v, want the program's 0, held", nd, held)
	}
	if ck, held := opts.Get(unix.TCP_CORK); !held || ck != 1 {
		t.Fatalf("after the ring: TCP_CORK %d held %v, want the program's 1, held", ck, held)
	}
	if sockopt(unix.TCP_NODELAY) != 1 || sockopt(unix.TCP_CORK) != 0 {
		t.Fatal("the socket's own settings: not Nagle off, cork off")
	}
	if !opts.Set(unix.TCP_NODELAY, 5) || !opts.Set(unix.TCP_CORK, 0) {
		t.Fatal("set while held: not kept")
	}
	if nd, _ := opts.Get(unix.TCP_NODELAY); nd != 1 {
		t.Fatalf("TCP_NODELAY kept as %d, want 1 (as the kernel stores it)", nd)
	}
	if sockopt(unix.TCP_NODELAY) != 1 || sockopt(unix.TCP_CORK) != 0 {
		t.Fatal("a set while held reached the socket")
	}
	opts.Set(unix.TCP_NODELAY, 0)
	opts.Set(unix.TCP_CORK, 1)
	opts.Release(mine)
	if sockopt(unix.TCP_NODELAY) != 0 || sockopt(unix.TCP_CORK) != 1 {
		t.Fatal("release: the program's settings not on the socket")
	}
	if _, held := opts.Get(unix.TCP_NODELAY); held || opts.Set(unix.TCP_NODELAY, 0) {
		t.Fatal("held after release")
	}
	opts.Hold(mine)
	if _, held := opts.Get(unix.TCP_NODELAY); held {
		t.Fatal("held again after release")
	}
}
