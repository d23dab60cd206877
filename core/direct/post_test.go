package direct

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// An offer through a post, as the two processes see it: the connector's
// mapping announces and binds, the acceptor's claims once and answers,
// and a withdrawn or stale offer is claimed by nobody.
func TestPostOffer(t *testing.T) {
	own, peer := slabPair(t, 4, 4, 256)
	server := netip.MustParseAddrPort("127.0.0.1:5000")
	client := netip.MustParseAddrPort("127.0.0.1:40001")
	unbound := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)

	po := own.Post(2)
	if po == nil || po.State() != PostFree || own.Post(own.Slots()) != nil {
		t.Fatal("posts of a fresh slab")
	}
	if i, u := peer.ClaimOffer(server, client, 0, 0); i != -1 || u {
		t.Fatalf("nothing offered: claimed %d, unbound %v", i, u)
	}
	own.Offers(1)
	po.Announce(unbound, server, 77, 0x6, 1000)
	if i, u := peer.ClaimOffer(server, client, 0, 500); i != -1 || !u {
		t.Fatalf("announced: claimed %d, unbound %v", i, u)
	}
	if _, u := peer.ClaimOffer(server, client, 0, 2000); u {
		t.Error("an offer announced before since counts as unbound")
	}
	if _, u := peer.ClaimOffer(server, client, 78, 500); u {
		t.Error("another socket's announced offer counts as the connection's")
	}
	if !po.Bind(client) {
		t.Fatal("bind")
	}
	other := netip.MustParseAddrPort("127.0.0.1:40002")
	if i, _ := peer.ClaimOffer(server, other, 0, 0); i != -1 {
		t.Fatalf("another connection claimed slot %d", i)
	}
	i, _ := peer.ClaimOffer(server, client, 0, 0)
	if i != 2 {
		t.Fatalf("claimed %d, want 2", i)
	}
	if j, _ := peer.ClaimOffer(server, client, 0, 0); j != -1 {
		t.Fatal("claimed twice")
	}
	ap := peer.Post(i)
	if ap.Held() != 0x6 || ap.Inode() != 77 || ap.Announced() != 1000 || ap.Client() != client {
		t.Errorf("the acceptor reads %#x %d %d %v", ap.Held(), ap.Inode(), ap.Announced(), ap.Client())
	}
	po.Arm(3)
	po.Arm(64) // out of range: ignored
	if m := ap.Armed(); m != 1<<3 {
		t.Errorf("armed %#x", m)
	}
	po.Wait()
	if !ap.Waited() {
		t.Error("the acceptor does not see the waiter")
	}
	ap.Answer(PostAccepted, 12345, 0x9)
	if start, held := po.Answered(); po.State() != PostAccepted || start != 12345 || held != 0x9 {
		t.Errorf("the connector reads %d %d %#x", po.State(), start, held)
	}
	// A connector that withdraws first wins: the acceptor finds nothing.
	po.Free()
	po.Announce(client, server, 77, 0, 3000)
	if !po.Swap(PostOffered, PostFree) {
		t.Fatal("withdraw")
	}
	if i, u := peer.ClaimOffer(server, client, 0, 0); i != -1 || u {
		t.Fatalf("withdrawn: claimed %d, unbound %v", i, u)
	}
	// The count lets an acceptor skip a slab without offers.
	if own.Offers(-1) != 0 {
		t.Fatal("offers count")
	}
	po.Announce(client, server, 77, 0, 3000)
	if i, _ := peer.ClaimOffer(server, client, 0, 0); i != -1 {
		t.Fatal("a slab whose count is 0 was looked at")
	}
}

// The mapped word: the acceptor says it maps the slab, and before it
// unmaps it learns whether offers are posted there; a connector that
// announced its offer reads the word after, so one of the two sees the
// other.
func TestPostMapped(t *testing.T) {
	own, peer := slabPair(t, 4, 4, 256)
	if own.Mapped() {
		t.Fatal("a fresh slab says it is mapped")
	}
	peer.SetMapped()
	if !own.Mapped() {
		t.Fatal("the connector does not see SetMapped")
	}
	own.Offers(1) // an offer announced: the acceptor keeps the slab
	if peer.Unmapping() || !own.Mapped() {
		t.Fatal("Unmapping with an offer posted")
	}
	own.Offers(-1)
	if !peer.Unmapping() || own.Mapped() {
		t.Fatal("Unmapping with no offer posted")
	}
}

// FuzzClaimOffer fills the posts' page of a peer's slab with the input,
// as a hostile connector may, and claims a connection from it: no panic,
// and a claim is only ever of a post that names the connection.
func FuzzClaimOffer(f *testing.F) {
	page := unix.Getpagesize()
	good := make([]byte, 2*PostSize)
	binary.LittleEndian.PutUint32(good[PostSize:], PostOffered)
	binary.LittleEndian.PutUint32(good[PostSize+8:], 40001)
	binary.LittleEndian.PutUint32(good[PostSize+12:], 5000)
	copy(good[PostSize+16:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1})
	copy(good[PostSize+32:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1})
	f.Add(good, uint16(5000), uint16(40001), uint32(0))
	f.Add([]byte{1, 0, 0, 0}, uint16(5000), uint16(1), uint32(7))
	f.Add(make([]byte, 64), uint16(0), uint16(0), uint32(0))
	own, err := NewSlab(4, SlotBytes(Size(4, 256)))
	if err != nil {
		f.Fatal(err)
	}
	peer, err := MapSlab(own.FD(), own.Slot())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { own.Unmap(); peer.Unmap() })
	f.Fuzz(func(t *testing.T, b []byte, sport, cport uint16, own uint32) {
		mem := peer.mem[:page]
		clear(mem)
		copy(mem, b)
		binary.LittleEndian.PutUint32(mem[page-postsTail:], 1) // skip nothing
		local := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), sport)
		remote := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), cport)
		i, _ := peer.ClaimOffer(local, remote, own, 0)
		if i < 0 {
			return
		}
		po := peer.Post(i)
		if po.State() != PostTaken || po.Server() != local || po.Client() != remote {
			t.Fatalf("claimed slot %d: state %d, %v <- %v", i, po.State(), po.Server(), po.Client())
		}
	})
}
