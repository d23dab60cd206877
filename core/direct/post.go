package direct

import (
	"net/netip"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Posts: an offer of a slab's area to the process that maps the slab,
// and its verdict, through the slab itself rather than a rendezvous
// connection (shim/post.go). Once a process pair shares a slab, a
// connector writes the offer of a connection into the post of the area
// it gives that connection, before its connect(), and the connection's
// client address and port after it; the acceptor's accept() finds the
// offer among the slabs it maps by the 4-tuple, claims it, and writes
// its answer there. Slot i's post is PostSize bytes at i*PostSize in the
// slab's first page (the last line of the page counts the offers,
// Offers, and says whether the acceptor maps the slab, Mapped), little
// endian:
//
//	0..3    state: PostFree, PostAnnounced, PostOffered, PostTaken,
//	        PostAccepted, PostDeclined (a futex word: a connector waiting
//	        for the verdict sleeps on it)
//	4..7    1: a connector thread sleeps on the state (the acceptor wakes it)
//	8..11   the client's port (0 until the connector's connect() picked it)
//	12..15  the server's port
//	16..31  the client's address (IPv6, IPv4-mapped)
//	32..47  the server's address
//	48..55  the acceptor's bells the connector holds (offerMsg.held)
//	56..63  the connector's bells armed by its poll and epoll sleeps: the
//	        acceptor rings them with the verdict
//	64..71  when the offer was announced (CLOCK_MONOTONIC, ns)
//	72..75  the inode of the connector's socket (sockdiag.Peer)
//	80..87  the answer: the acceptor's start time
//	88..95  the answer: the connector's bells the acceptor holds
//
// The connector owns a post from PostFree to PostOffered and again from
// the verdict on, the acceptor from PostTaken (its claim, a compare and
// swap from PostOffered) to the verdict. A connector withdraws an offer
// nobody claimed with a compare and swap from PostOffered (or
// PostAnnounced) to PostFree, so that exactly one of the two decides.
// Everything here is written by the other process too and is checked
// where it is used: a state out of range is a decline, the addresses are
// only compared, the masks are what an offer's and an answer's are.
type Post struct{ b []byte }

// PostSize is the bytes of one post.
const PostSize = 128

// Post states.
const (
	PostFree      = 0 // no offer
	PostAnnounced = 1 // offered; the client's port comes after the connect()
	PostOffered   = 2 // offered, the 4-tuple complete
	PostTaken     = 3 // the acceptor claimed it and is answering
	PostAccepted  = 4 // answered: the connection is the area's
	PostDeclined  = 5 // answered: plain TCP
)

// Post returns slot i's post, nil when the slab has no post for it.
func (s *Slab) Post(i int) *Post {
	if i < 0 || i >= s.Slots() || (i+1)*PostSize > unix.Getpagesize()-postsTail {
		return nil
	}
	return &Post{b: s.mem[i*PostSize : (i+1)*PostSize : (i+1)*PostSize]}
}

// postsTail is the end of the posts' page: the count of offers
// (Offers) at its start, the acceptor's mapped word (Mapped) after it.
const postsTail = 64

// tailWord returns the uint32 at off within the posts' page's tail.
func (s *Slab) tailWord(off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&s.mem[unix.Getpagesize()-postsTail+off]))
}

// Offers adds delta to the count of the slab's posts that hold an offer,
// which the connector keeps, and returns the count: an acceptor skips
// the posts of a slab whose count is 0 (the other process writes it too:
// only a hint).
func (s *Slab) Offers(delta int32) uint32 {
	return atomic.AddUint32(s.tailWord(0), uint32(delta))
}

// SetMapped says, for the acceptor, that it maps the slab and claims the
// offers posted in it.
func (s *Slab) SetMapped() { atomic.StoreUint32(s.tailWord(4), 1) }

// Unmapping is the acceptor's before it unmaps the slab: false, and the
// slab is to stay mapped, when offers are posted in it. A connector
// reads Mapped after it announced its offer (Offers counts it), and the
// acceptor Offers after it cleared the mapped word, so one of them sees
// the other: an offer is withdrawn or claimed, never left to expire.
func (s *Slab) Unmapping() bool {
	atomic.StoreUint32(s.tailWord(4), 0)
	if s.Offers(0) != 0 {
		s.SetMapped()
		return false
	}
	return true
}

// Mapped reports, for the connector, whether the acceptor says it maps
// the slab (SetMapped, Unmapping). A process that exec'ed or died says
// nothing: the connector tells those apart itself.
func (s *Slab) Mapped() bool { return atomic.LoadUint32(s.tailWord(4)) == 1 }

func (p *Post) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&p.b[off])) }
func (p *Post) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&p.b[off])) }

func (p *Post) addr(off int) netip.Addr {
	var a [16]byte
	copy(a[:], p.b[off:off+16])
	return netip.AddrFrom16(a).Unmap()
}

func (p *Post) putAddr(off int, a netip.Addr) {
	x := a.As16()
	copy(p.b[off:off+16], x[:])
}

// StateWord is the state, for a futex sleep on it.
func (p *Post) StateWord() *uint32 { return p.u32(0) }

// State returns the state.
func (p *Post) State() uint32 { return atomic.LoadUint32(p.u32(0)) }

// Swap moves the state from old to new; false when it was not old.
func (p *Post) Swap(old, new uint32) bool { return atomic.CompareAndSwapUint32(p.u32(0), old, new) }

// Free ends the connector's use of the post (after the verdict).
func (p *Post) Free() { atomic.StoreUint32(p.u32(0), PostFree) }

// Announce writes the connector's offer of a connection to server from
// the socket with inode ino, its client address (the port 0 while the
// connect() has not picked it: Bind follows), what it holds of the
// acceptor's bells and now (CLOCK_MONOTONIC, ns), and makes it visible.
func (p *Post) Announce(client, server netip.AddrPort, ino uint32, held uint64, now int64) {
	atomic.StoreUint32(p.u32(4), 0)
	p.putAddr(32, server.Addr())
	atomic.StoreUint32(p.u32(12), uint32(server.Port()))
	p.putAddr(16, client.Addr())
	atomic.StoreUint32(p.u32(8), uint32(client.Port()))
	atomic.StoreUint64(p.u64(48), held)
	atomic.StoreUint64(p.u64(56), 0)
	atomic.StoreInt64((*int64)(unsafe.Pointer(&p.b[64])), now)
	atomic.StoreUint32(p.u32(72), ino)
	state := uint32(PostAnnounced)
	if client.Port() != 0 {
		state = PostOffered
	}
	atomic.StoreUint32(p.u32(0), state)
}

// Bind completes an announced offer with the client's address and port
// (after the connect()); false when the offer is no longer announced.
func (p *Post) Bind(client netip.AddrPort) bool {
	p.putAddr(16, client.Addr())
	atomic.StoreUint32(p.u32(8), uint32(client.Port()))
	return p.Swap(PostAnnounced, PostOffered)
}

// Client returns the client's address and port (port 0: not bound yet).
func (p *Post) Client() netip.AddrPort {
	return netip.AddrPortFrom(p.addr(16), uint16(atomic.LoadUint32(p.u32(8))))
}

// Server returns the server's address and port.
func (p *Post) Server() netip.AddrPort {
	return netip.AddrPortFrom(p.addr(32), uint16(atomic.LoadUint32(p.u32(12))))
}

// Inode returns the inode of the connector's socket.
func (p *Post) Inode() uint32 { return atomic.LoadUint32(p.u32(72)) }

// Announced returns when the offer was announced (CLOCK_MONOTONIC, ns).
func (p *Post) Announced() int64 { return atomic.LoadInt64((*int64)(unsafe.Pointer(&p.b[64]))) }

// Held returns the acceptor's bells the connector says it holds.
func (p *Post) Held() uint64 { return atomic.LoadUint64(p.u64(48)) }

// Arm asks the acceptor to ring the connector's bell with the verdict
// (bell 0: none).
func (p *Post) Arm(bell int) {
	if bell > 0 && bell < 64 {
		atomic.OrUint64(p.u64(56), 1<<bell)
	}
}

// Armed takes the bells armed (the acceptor, with the verdict).
func (p *Post) Armed() uint64 { return atomic.SwapUint64(p.u64(56), 0) }

// Wait says that a connector thread is about to sleep on the state.
func (p *Post) Wait() { atomic.StoreUint32(p.u32(4), 1) }

// Waited reports whether a connector thread sleeps on the state.
func (p *Post) Waited() bool { return atomic.LoadUint32(p.u32(4)) != 0 }

// Answer writes the acceptor's answer and the verdict state (PostAccepted
// or PostDeclined).
func (p *Post) Answer(state uint32, start, held uint64) {
	atomic.StoreUint64(p.u64(80), start)
	atomic.StoreUint64(p.u64(88), held)
	atomic.StoreUint32(p.u32(0), state)
}

// Answered returns the answer's start time and mask.
func (p *Post) Answered() (start, held uint64) {
	return atomic.LoadUint64(p.u64(80)), atomic.LoadUint64(p.u64(88))
}

// ClaimOffer looks among the slab's posts for an offer of the connection
// local <- remote (addresses unmapped) and claims it (PostTaken): the
// slot's index, or -1. unbound reports announced offers to local, not
// bound yet, announced at or after since (CLOCK_MONOTONIC, ns): the
// connection may be one of theirs. With own non-zero only the announced
// offer of the socket with that inode counts (sockdiag.Peer named it).
func (s *Slab) ClaimOffer(local, remote netip.AddrPort, own uint32, since int64) (i int, unbound bool) {
	if s.Offers(0) == 0 {
		return -1, false
	}
	for i := range s.Slots() {
		po := s.Post(i)
		if po == nil {
			break
		}
		st := po.State()
		if (st != PostOffered && st != PostAnnounced) || po.Server() != local {
			continue
		}
		if st == PostAnnounced {
			if (own == 0 || po.Inode() == own) && po.Announced() >= since {
				unbound = true
			}
			continue
		}
		if po.Client() != remote || !po.Swap(PostOffered, PostTaken) {
			continue
		}
		if po.Client() != remote || po.Server() != local {
			// Read before the connector gave the post a new offer: the
			// connector does not write a taken post, so this look is
			// the offer's own.
			po.Swap(PostTaken, PostOffered)
			continue
		}
		return i, false
	}
	return -1, unbound
}
