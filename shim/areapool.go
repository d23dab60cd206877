package shim

import (
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Area reuse. Each direct connection has an area of its own (direct.go).
// A connection with an area of its own cost the connector a memfd, its
// size, its seals and a mapping, the acceptor a mapping, and both an
// unmapping at the end: a TLB shootdown on the other core whenever a
// thread of the process ran there, and the mappings and unmappings of a
// process queue behind each other on its memory map's lock. That was
// about a fifth of opening a connection (docs/direct.md, "Area reuse").
// So the connections between two processes take their areas from slabs:
//
//   - A slab (direct.Slab) is one memfd of slabSlots areas, made by the
//     connector once it knows the acceptor's process (its start time,
//     from a first connection's answer), mapped once by each side. The
//     connector keeps its memfd (a protected, high-numbered fd) and
//     passes it with every offer of one of its areas, with the area's
//     place (offerMsg.token); at most slabsPerPeer slabs per peer process,
//     beyond which a connection gets an area of its own as before.
//   - The acceptor keeps its mapping of a slab, by the memfd's identity,
//     for the next offers of the same process; it refuses an offer of an
//     area whose earlier connection it still holds (errSlotInUse): a
//     connector that reused an area too early, by a bug or on purpose,
//     would otherwise write into a live connection.
//   - Each side, once its handle is released (no thread of the process
//     can use it), marks its side released in the area. The connector
//     gives an area to a later connection (to the same process only)
//     once both marks are there, resetting it first. The side that lets
//     go last gives the pages of an area that carried more than
//     reuseMoved bytes back (direct.Slab.Discard), as unmapping an area
//     of its own did.
//   - Slabs with no connection left go when the process has closed no
//     connection for idleRelease (the reaper's release); the acceptor's
//     mappings past peerSlabsMax go oldest first.
//
// A hostile peer gains nothing: a slab is only shared with the one
// process it was made for, which could already write anything into its
// areas, and the acceptor validates a reused area as a new one.
type areaPool struct {
	mu   sync.Mutex
	own  map[procID][]*ownSlab      // +checklocks:mu; slabs made here, by acceptor process
	peer map[direct.Ident]*peerSlab // +checklocks:mu; peers' slabs mapped here
	// onPeers, when set, is told how many peers' slabs are mapped each
	// time that changes (under mu): offers may be posted in them, which
	// the interposer cannot see (plainaccept.go).
	onPeers func(n int)
}

// ownSlab is a slab this process made, and where each of its areas is.
type ownSlab struct {
	s        *direct.Slab
	mappedBy string  // +checklocks:areaPool.mu; the peer's rendezvous socket when it accepted an offer of one of its areas (it maps the slab), else ""
	state    []uint8 // +checklocks:areaPool.mu; per area: slotFree, slotLive, slotDraining
}

// An area of a slab this process made is free (never used, or let go by
// both sides), live (a connection of this process holds it), draining
// (let go here, maybe not by the acceptor yet), or retired (its
// connection was kept by a fork child, or a thread was still inside its
// handle: directStream.noReuse).
const (
	slotFree = iota
	slotLive
	slotDraining
	slotRetired // another process may still use it: never given again
)

// peerSlab is a peer's slab mapped here.
type peerSlab struct {
	s    *direct.Slab
	from procID
	live []bool    // +checklocks:areaPool.mu; areas a connection here holds
	n    int       // +checklocks:areaPool.mu; how many, and claims of posted offers being answered (claimOffer)
	used time.Time // +checklocks:areaPool.mu; last offer of it (eviction)
	gone bool      // +checklocks:areaPool.mu; its process was found gone (putPeer)
}

const (
	// slabSlots is how many areas one slab holds, slabsPerPeer how many
	// slabs a process makes for one peer process, peerSlabsMax how many
	// peers' slabs it keeps mapped. An area comes back only after its
	// close's grace (directGrace) and the reaper's lateness, about 60 ms:
	// a process that opens and closes connections one after another at
	// 5,000 a second holds 300 areas in their grace. 8 slabs (128 areas)
	// ran out there, and more than half of the setup benchmark's
	// connections made an area of their own (docs/direct.md, "Area
	// reuse"). Slabs are made only as connections need them and go when
	// the process is idle. An acceptor keeps 64 peers' slabs: the slabs
	// of client processes that exited stay mapped, with the pages their
	// areas kept, until the cap evicts them (a 10-minute pre-fork soak's
	// server peaked at 112 MiB with 256 against 88 with 64).
	slabSlots    = 16
	slabsPerPeer = 32
	peerSlabsMax = 64
	// reuseMoved: the pages of an area that carried more bytes than this
	// (both ways) go back when both sides let it go.
	reuseMoved = 256 << 10
)

// errSlotInUse: an offer names an area whose earlier connection this
// process still holds.
var errSlotInUse = errorString("the offered area is still in use here")

// slabArea is where a direct stream's area lives: an area of its own
// (slab nil) or slot i of a slab (this process's, or the peer's).
type slabArea struct {
	own  *ownSlab
	peer *peerSlab
	i    int
}

// slotToken encodes a slab's area for an offer (offerMsg.token): the
// slab's bytes per area and the area's index; 0 for an area of its own.
func slotToken(s *direct.Slab, i int) uint64 { return uint64(s.Slot())<<16 | uint64(i) }

// tokenSlot decodes slotToken.
func tokenSlot(t uint64) (slot, i int) { return int(t >> 16), int(t & 0xffff) }

// ownArea returns the area for a connection to process peer (side 0),
// where it lives, and the memfd its offer carries (protected; a slab's
// stays this process's, an area of its own is closed once the offer
// carried it: directStream.sent): an area of a slab made for peer when
// its start time is known (and, when peer's is, the same), else an area
// of its own.
func (p *Process) ownArea(peer procID) (*direct.Area, slabArea, int, error) {
	blocks, bsize := p.cfg.Blocks, directSlot(p.cfg.BlockSize)
	size := direct.Size(blocks, bsize)
	if id, ok := p.knownPeer(peer.pid); ok && (peer.start == 0 || peer.start == id.start) {
		if sl, i := p.areas.takeOwn(p, id, direct.SlotBytes(size)); sl != nil {
			a := sl.s.Area(i)
			if a.Moved() > reuseMoved {
				// Both sides let it go without either giving its pages
				// back (they let go at once: putOwn, putPeer).
				sl.s.Discard(i)
			}
			if a.Reset(blocks, bsize, 1) == nil {
				return a, slabArea{own: sl, i: i}, sl.s.FD(), nil
			}
			p.areas.putOwn(p, slabArea{own: sl, i: i}, a, true)
		}
	}
	a, err := direct.NewArea(blocks, bsize, 1)
	if err != nil {
		return nil, slabArea{}, -1, err
	}
	p.protect(a.FD())
	return a, slabArea{}, a.FD(), nil
}

// takeOwn finds a free area of slot bytes in the slabs made for process
// id, making a slab when none has one and fewer than slabsPerPeer exist,
// and marks it live; nil when there is none.
func (ap *areaPool) takeOwn(p *Process, id procID, slot int) (*ownSlab, int) {
	ap.mu.Lock()
	for _, sl := range ap.own[id] {
		if sl.s.Slot() != slot {
			continue
		}
		for i, st := range sl.state {
			if st == slotFree || st == slotDraining && sl.s.Area(i).Released(1) {
				sl.state[i] = slotLive
				ap.mu.Unlock()
				return sl, i
			}
		}
	}
	full := len(ap.own[id]) >= slabsPerPeer
	ap.mu.Unlock()
	if full {
		return nil, 0
	}
	s, err := direct.NewSlab(slabSlots, slot)
	if err != nil {
		return nil, 0
	}
	fd := highFD(s.FD())
	s.SetFD(fd)
	p.protect(fd)
	sl := &ownSlab{s: s, state: make([]uint8, s.Slots())}
	sl.state[0] = slotLive
	ap.mu.Lock()
	if len(ap.own[id]) >= slabsPerPeer { // made meanwhile by concurrent connects
		ap.mu.Unlock()
		p.unprotect(fd)
		s.Unmap()
		return nil, 0
	}
	if ap.own == nil {
		ap.own = map[procID][]*ownSlab{}
	}
	ap.own[id] = append(ap.own[id], sl)
	ap.mu.Unlock()
	p.count("area.slab")
	return sl, 0
}

// putOwn takes back the area a of this process's connection (side 0),
// its handle released: an area of its own is unmapped (its memfd, still
// protected if the offer never carried it, closed), a slab's waits for
// the acceptor's mark,
// or is retired when another process or a stuck thread may still use it
// (noReuse). Of an area that carried many bytes, whichever side lets go
// last gives the pages back, before the area can be taken again (here:
// before it is draining; the acceptor: before its mark).
func (ap *areaPool) putOwn(p *Process, where slabArea, a *direct.Area, noReuse bool) {
	if where.own == nil {
		if a.FD() >= 0 {
			p.unprotect(a.FD())
		}
		a.Unmap()
		return
	}
	if noReuse {
		ap.mu.Lock()
		where.own.state[where.i] = slotRetired
		ap.mu.Unlock()
		return
	}
	if last := a.Release(0); last && a.Moved() > reuseMoved {
		where.own.s.Discard(where.i)
	}
	ap.mu.Lock()
	where.own.state[where.i] = slotDraining
	ap.mu.Unlock()
}

// peerArea maps the area an offer from process from names: files[0] is
// its memfd, an area of its own (token 0) or a slab whose area token
// names (slotToken). Given back with putPeer.
func (p *Process) peerArea(from procID, fd int, token uint64) (*direct.Area, slabArea, error) {
	if token == 0 {
		a, err := direct.MapArea(fd)
		return a, slabArea{}, err
	}
	ap := &p.areas
	slot, i := tokenSlot(token)
	id, err := direct.AreaIdent(fd)
	if err != nil {
		return nil, slabArea{}, err
	}
	ap.mu.Lock()
	ps := ap.peer[id]
	if ps != nil && (ps.from != from || ps.s.Slot() != slot) {
		// Another process offers it now, or other slots: a mapping
		// afresh, once nothing here holds the old one.
		if ps.n > 0 || !ps.s.Unmapping() {
			ap.mu.Unlock()
			return nil, slabArea{}, errSlotInUse
		}
		delete(ap.peer, id)
		ap.peersChangedLocked()
		defer ps.s.Unmap()
		ps = nil
	}
	if ps == nil {
		ap.mu.Unlock()
		s, err := direct.MapSlab(fd, slot)
		if err != nil {
			return nil, slabArea{}, err
		}
		ap.mu.Lock()
		if old := ap.peer[id]; old != nil { // mapped meanwhile by a concurrent offer
			s.Unmap()
			ps = old
		} else {
			ps = &peerSlab{s: s, from: from, live: make([]bool, s.Slots())}
			s.SetMapped() // its posted offers are claimed here (post.go)
			if ap.peer == nil {
				ap.peer = map[direct.Ident]*peerSlab{}
			}
			ap.peer[id] = ps
			ap.peersChangedLocked()
		}
	}
	if i >= len(ps.live) || ps.from != from {
		ap.mu.Unlock()
		return nil, slabArea{}, errBadOffer
	}
	if ps.live[i] {
		ap.mu.Unlock()
		return nil, slabArea{}, errSlotInUse
	}
	ps.live[i] = true
	ps.n++
	ps.used = time.Now()
	evicted := ap.evictLocked() // after the mark: never this one
	ap.mu.Unlock()
	for _, e := range evicted {
		e.Unmap()
	}
	return ps.s.Area(i), slabArea{peer: ps, i: i}, nil
}

// putPeer takes back the area a of a connection from a peer (side 1),
// its handle released: marked released for the connector (after its
// place is free here, so that an offer of it again is not refused), or
// never when another process or a stuck thread may still use it
// (noReuse); unmapped if it was an area of its own. The pages of a
// slab's area that carried many bytes go back here when the connector
// let go first. A slab whose process is gone (a process that exits with
// connections in their grace never lets go) is unmapped once nothing
// here holds an area of it: its pages go with the last mapping, which
// may be a fork child's of the connector that still reads.
func (ap *areaPool) putPeer(p *Process, where slabArea, a *direct.Area, noReuse bool) {
	if where.peer == nil {
		a.Release(1)
		a.Unmap()
		return
	}
	ps := where.peer
	gone := false
	big := a.Moved() > reuseMoved
	if !noReuse && big && a.Released(0) {
		ps.s.Discard(where.i) // the connector let go first (putOwn)
	} else if big {
		gone = rendezvous.StartTime(ps.from.pid) != ps.from.start
	}
	ap.mu.Lock()
	ps.live[where.i] = false
	ps.n--
	if !noReuse {
		a.Release(1) // under the lock: drain and eviction unmap only slabs nothing holds
	}
	ps.gone = ps.gone || gone
	drop := ap.dropGoneLocked(ps)
	ap.mu.Unlock()
	if drop {
		ps.s.Unmap()
	}
}

// dropGoneLocked takes ps out of the pool when its process is gone and
// nothing here holds it; the caller unmaps it then, once it has let go
// of the lock.
//
// +checklocks:ap.mu
func (ap *areaPool) dropGoneLocked(ps *peerSlab) bool {
	if !ps.gone || ps.n != 0 || ap.peer[ps.s.Ident()] != ps {
		return false
	}
	delete(ap.peer, ps.s.Ident())
	ap.peersChangedLocked()
	return true
}

// evictLocked drops the peers' slabs nothing here holds, oldest first,
// while more than peerSlabsMax are mapped, and returns them for the
// caller to unmap once it has let go of the lock.
//
// +checklocks:ap.mu
func (ap *areaPool) evictLocked() []*direct.Slab {
	var out []*direct.Slab
	var posting map[*peerSlab]bool // offers are posted in them (post.go): kept
	for len(ap.peer) > peerSlabsMax {
		var oldest *peerSlab
		var key direct.Ident
		for k, ps := range ap.peer {
			if ps.n == 0 && !posting[ps] && (oldest == nil || ps.used.Before(oldest.used)) {
				oldest, key = ps, k
			}
		}
		if oldest == nil {
			break
		}
		if !oldest.letGo() {
			if posting == nil {
				posting = map[*peerSlab]bool{}
			}
			posting[oldest] = true
			continue
		}
		delete(ap.peer, key)
		ap.peersChangedLocked()
		out = append(out, oldest.s)
	}
	return out
}

// drain unmaps every slab no connection here holds an area of: the
// reaper's release, once the process has closed no connection for a
// while. An area of a slab made here that the acceptor still holds is
// left to it (its mapping keeps the memory).
func (ap *areaPool) drain(p *Process) {
	var gone []*direct.Slab
	ap.mu.Lock()
	for id, list := range ap.own {
		k := 0
		for _, sl := range list {
			busy := false
			for _, st := range sl.state {
				busy = busy || st == slotLive
			}
			if busy {
				list[k] = sl
				k++
				continue
			}
			gone = append(gone, sl.s)
		}
		if k == 0 {
			delete(ap.own, id)
		} else {
			ap.own[id] = list[:k]
		}
	}
	for id, ps := range ap.peer {
		if ps.n == 0 && ps.letGo() {
			delete(ap.peer, id)
			ap.peersChangedLocked()
			gone = append(gone, ps.s)
		}
	}
	ap.mu.Unlock()
	for _, s := range gone {
		if s.FD() >= 0 {
			p.unprotect(s.FD())
		}
		s.Unmap()
	}
}

// releaseIdle is the reaper's release, once the process has closed no
// connection for idleRelease: the slabs no connection uses go, and the
// bells of peer processes gone (bells.go), then the Go heap's free pages
// (debug.FreeOSMemory).
func (p *Process) releaseIdle() {
	p.areas.drain(p)
	p.dropGonePeers()
	debug.FreeOSMemory()
}

// mapped says whether the acceptor process that listens at socket (its
// rendezvous socket names it: an exec makes another) maps sl, as far as
// this process knows: an offer of one of sl's areas was accepted there
// (posted offers go only to an acceptor that maps the slab). The
// acceptor says when it stops (direct.Slab.Mapped).
func (ap *areaPool) mapped(sl *ownSlab, socket string) bool {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return sl.mappedBy != "" && sl.mappedBy == socket
}

// learnMapped notes that the acceptor at socket maps sl.
func (ap *areaPool) learnMapped(sl *ownSlab, socket string) {
	ap.mu.Lock()
	sl.mappedBy = socket
	ap.mu.Unlock()
}

// claimOffer claims the posted offer of the connection local <- remote
// (direct.Slab.ClaimOffer) in a peer's slab mapped here. The slab found
// stays mapped until the claim is answered: it counts as held
// (peerSlab.n) until takeClaimed makes the hold its area's, or unpin
// lets it go. unbound: see ClaimOffer.
func (ap *areaPool) claimOffer(local, remote netip.AddrPort, own uint32, since int64) (ps *peerSlab, i int, unbound bool) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for _, ps := range ap.peer {
		i, u := ps.s.ClaimOffer(local, remote, own, since)
		if i >= 0 {
			ps.n++
			return ps, i, false
		}
		unbound = unbound || u
	}
	return nil, -1, unbound
}

// takeClaimed marks area i of ps, whose posted offer this process
// claimed (claimOffer), held by the connection it becomes, as peerArea
// does for a rendezvous offer's area; errSlotInUse when a connection here
// holds it still (the claim is to be declined, and unpinned).
func (ap *areaPool) takeClaimed(ps *peerSlab, i int) (*direct.Area, slabArea, error) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if i >= len(ps.live) || ps.live[i] {
		return nil, slabArea{}, errSlotInUse
	}
	ps.live[i] = true
	ps.used = time.Now()
	return ps.s.Area(i), slabArea{peer: ps, i: i}, nil
}

// unpin ends the hold of a claim on ps that takeClaimed did not take.
func (ap *areaPool) unpin(ps *peerSlab) {
	ap.mu.Lock()
	ps.n--
	drop := ap.dropGoneLocked(ps)
	ap.mu.Unlock()
	if drop {
		ps.s.Unmap()
	}
}

// peersChangedLocked tells onPeers how many peers' slabs are mapped.
//
// +checklocks:ap.mu
func (ap *areaPool) peersChangedLocked() {
	if ap.onPeers != nil {
		ap.onPeers(len(ap.peer))
	}
}

// letGo is what an acceptor does before it unmaps ps, which nothing here
// holds: false, and ps stays, while offers are posted in it
// (direct.Slab.Unmapping) by a process still running (one killed between
// its offer and its verdict leaves its count).
func (ps *peerSlab) letGo() bool {
	return ps.s.Unmapping() || rendezvous.StartTime(ps.from.pid) != ps.from.start
}
