package direct

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// slabPair makes a slab of n slots for areas of blocks blocks of size
// bytes and maps it again through its memfd, as the peer process would.
func slabPair(t *testing.T, n, blocks, size int) (own, peer *Slab) {
	t.Helper()
	own, err := NewSlab(n, SlotBytes(Size(blocks, size)))
	if err != nil {
		t.Fatal(err)
	}
	peer, err = MapSlab(own.FD(), own.Slot())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Unmap(); peer.Unmap() })
	return own, peer
}

// openSlot makes slot i of own fresh and opens both sides of it.
func openSlot(t *testing.T, own, peer *Slab, i, blocks, size int) (*Conn, *Conn) {
	t.Helper()
	if err := own.Area(i).Reset(blocks, size, 3); err != nil {
		t.Fatal(err)
	}
	a, err := Open(own.Area(i), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(peer.Area(i), 1)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// A slab's slots are areas of their own, and one used before carries a
// later connection as a new one: Reset clears what the earlier one left
// in both directions (bytes published and unread each way), and the
// release marks say which side let go last.
func TestSlabSlotReuse(t *testing.T) {
	const blocks, size = 8, 1024
	own, peer := slabPair(t, 4, blocks, size)
	if own.Slots() != 4 || peer.Slots() != 4 || own.Area(4) != nil || own.Area(-1) != nil {
		t.Fatalf("slots: %d and %d", own.Slots(), peer.Slots())
	}
	if own.Ident() != peer.Ident() {
		t.Fatal("the two mappings name different memfds")
	}
	left := bytes.Repeat([]byte("stale "), 500)
	for round := range 3 {
		a, b := openSlot(t, own, peer, 2, blocks, size)
		got := make([]byte, 4096)
		if n, _, err := b.Recv(got, false, false); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("round %d: a fresh area held %d bytes (%v)", round, n, err)
		}
		if n, _, err := a.Recv(got, false, false); !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("round %d: a fresh area held %d bytes the other way (%v)", round, n, err)
		}
		msg := []byte{byte('a' + round), 1, 2, 3}
		if n, _, err := a.Send(msg, true); n != len(msg) || err != nil {
			t.Fatalf("round %d: send %d %v", round, n, err)
		}
		if n, _, err := b.Recv(got, false, false); n != len(msg) || err != nil || !bytes.Equal(got[:n], msg) {
			t.Fatalf("round %d: recv %q %v", round, got[:n], err)
		}
		// Leave bytes unread both ways for the next round to not see.
		a.Send(left, false)
		b.Send(left, false)
		if own.Area(2).Moved() == 0 {
			t.Fatalf("round %d: nothing counted as moved", round)
		}
		a.Release()
		b.Release()
		if last := own.Area(2).Release(0); last {
			t.Fatalf("round %d: the first side to let go is told it was last", round)
		}
		if own.Area(2).Released(1) || !peer.Area(2).Released(0) {
			t.Fatalf("round %d: marks %v %v", round, own.Area(2).Released(0), own.Area(2).Released(1))
		}
		if last := peer.Area(2).Release(1); !last {
			t.Fatalf("round %d: the second side to let go is not told it was last", round)
		}
	}
	// Another slot is untouched by all that.
	a, b := openSlot(t, own, peer, 1, blocks, size)
	got := make([]byte, 64)
	if n, _, err := b.Recv(got, false, false); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("slot 1 held %d bytes (%v)", n, err)
	}
	a.Release()
	b.Release()
}

// Discard gives a slot's pages back, all but the header's, for both
// mappings; the slot then works as a fresh one.
func TestSlabDiscard(t *testing.T) {
	const blocks, size = 16, 4096
	own, peer := slabPair(t, 2, blocks, size)
	a, b := openSlot(t, own, peer, 1, blocks, size)
	a.Send(bytes.Repeat([]byte{0xee}, blocks*(size-HeaderSize)), false)
	a.Release()
	b.Release()
	page := unix.Getpagesize()
	slot := peer.Area(1).mem
	if bytes.Count(slot[page:], []byte{0xee}) == 0 {
		t.Fatal("the sent bytes are not in the slot")
	}
	own.Discard(1)
	if n := bytes.Count(slot[page:], []byte{0xee}); n != 0 {
		t.Fatalf("%d sent bytes left in the slot after Discard", n)
	}
	a, b = openSlot(t, own, peer, 1, blocks, size)
	defer func() { a.Release(); b.Release() }()
	if n, _, err := a.Send([]byte("again"), true); n != 5 || err != nil {
		t.Fatalf("send after discard: %d %v", n, err)
	}
	got := make([]byte, 16)
	if n, _, err := b.Recv(got, false, false); n != 5 || err != nil || string(got[:n]) != "again" {
		t.Fatalf("recv after discard: %q %v", got[:n], err)
	}
}

// MapSlab takes only a sealed memfd of the posts' page and whole slots of
// whole pages.
func TestMapSlabRejects(t *testing.T) {
	page := unix.Getpagesize()
	memfd := func(size int64, seal bool) int {
		fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Ftruncate(fd, size); err != nil {
			t.Fatal(err)
		}
		if seal {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
				t.Fatal(err)
			}
		}
		return fd
	}
	for _, c := range []struct {
		name string
		fd   int
		slot int
	}{
		{"unsealed", memfd(int64(4*page), false), page},
		{"slot not whole pages", memfd(int64(4*page), true), page + 64},
		{"size not whole slots", memfd(int64(4*page), true), 2 * page},
		{"no posts' page", memfd(int64(2*page), true), 2 * page},
		{"smaller than a slot", memfd(int64(page), true), 2 * page},
		{"slot below a header", memfd(int64(page), true), 0},
	} {
		if s, err := MapSlab(c.fd, c.slot); err == nil {
			s.Unmap()
			t.Errorf("%s: mapped", c.name)
		}
	}
	if s, err := MapSlab(memfd(int64(5*page), true), 2*page); err != nil || s.Slots() != 2 {
		t.Errorf("a good slab: %v", err)
	} else {
		s.Unmap()
	}
}
