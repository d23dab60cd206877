package shim

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Bells: how a direct connection's peer wakes a sleeper of this process
// in epoll, poll or select without a fd per connection
// (preload/c/direct.h). Each emulated epoll set's kick eventfd is a bell,
// numbered within the process (1..direct.FirstPollBell-1, never reused),
// and so are the kick eventfds of the interposer's first threads in poll
// and select (the numbers from direct.FirstPollBell, by the thread's slot
// in preload/c/pollkick.c; a slot keeps its eventfd for good), and the
// switch watcher's eventfd is bell 0 (switchwatch.go); a peer process gets
// copies of this process's bells in the rendezvous (the offer's files
// after the area, the answer's files), once per process pair, and keeps
// them in one table for all its connections to this process. A sleeping
// set arms its connections with its bell's number: the peer writes the
// bell (an eventfd write, the cheapest wake) when it holds it, else it
// rings the socket (a byte on the TCP connection, which the set watches
// too). A process keeps one fd per bell of each peer process it has
// connections to, not one per connection.
//
// A set made after a rendezvous would have a bell that peer has not got
// (a postgres backend claims its connection in its first epoll_ctl, before
// the set it adds it to exists; a client makes its set after connecting),
// and its sleepers would be rung on the socket: a TCP send per wake. So a
// rendezvous of a process without a set first makes a spare bell, which
// goes with the others, and the next set takes it as its own. (A process
// with a set has its bell already, and a peer process holds each bell it
// is given while it keeps its record of this process: a spare there would
// cost each peer a fd for nothing.)

// ownBells numbers this process's bells.
type ownBells struct {
	mu    sync.Mutex
	fds   [direct.MaxBells]int // by number: the set's kick eventfd, or 0 (none: never given, or retired)
	next  int                  // the next number to give (numbers are not reused)
	spare int                  // a bell no set took yet (given ahead), or 0
}

// setWatcher makes fd (the switch watcher's eventfd) bell 0.
func (b *ownBells) setWatcher(fd int) {
	b.mu.Lock()
	b.fds[direct.WatcherBell] = fd + 1
	b.mu.Unlock()
}

// add numbers fd (a set's kick eventfd) and returns its number, or 0 when
// they ran out (the set's sleepers are rung on the socket).
func (b *ownBells) add(fd int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addLocked(fd)
}

// addLocked is add with b.mu held.
//
// +checklocks:b.mu
func (b *ownBells) addLocked(fd int) int {
	if b.next == 0 {
		b.next = 1
	}
	if b.next >= direct.FirstPollBell {
		return 0
	}
	n := b.next
	b.next++
	b.fds[n] = fd + 1
	return n
}

// takeSpare returns the spare bell (its eventfd and number) for a new
// set, or -1, 0: none.
func (b *ownBells) takeSpare() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.spare
	if n == 0 {
		return -1, 0
	}
	b.spare = 0
	return b.fds[n] - 1, n
}

// needsSpare reports whether a spare bell would get a number.
func (b *ownBells) needsSpare() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.needsSpareLocked()
}

// needsSpareLocked is needsSpare with b.mu held.
//
// +checklocks:b.mu
func (b *ownBells) needsSpareLocked() bool {
	return b.spare == 0 && max(b.next, 1) < direct.FirstPollBell
}

// addSpare numbers fd as the spare bell; false when there is one already
// or numbers ran out (the caller closes fd).
func (b *ownBells) addSpare(fd int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.needsSpareLocked() {
		return false
	}
	b.spare = b.addLocked(fd)
	return true
}

// moveSpare moves the spare bell's eventfd off old with move (which
// returns the new fd, or -1); false when old is not the spare's.
func (b *ownBells) moveSpare(old int, move func(int) int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare == 0 || b.fds[b.spare]-1 != old {
		return false
	}
	nfd := move(old)
	if nfd < 0 {
		return false
	}
	b.fds[b.spare] = nfd + 1 // the peers' copies are of the same eventfd
	return true
}

// moved notes that bell n's eventfd is at fd now.
func (b *ownBells) moved(n, fd int) {
	b.mu.Lock()
	if n > 0 && b.fds[n] != 0 {
		b.fds[n] = fd + 1
	}
	b.mu.Unlock()
}

// retire forgets bell n (its set closed).
func (b *ownBells) retire(n int) {
	b.mu.Lock()
	b.fds[n] = 0
	b.mu.Unlock()
}

// unsent returns at most limit of the live bells not in sent (a mask by
// number), with the poll threads' (poll, by slot; -1: none): their fds,
// in increasing number, and their mask.
func (b *ownBells) unsent(sent uint64, limit int, poll []int) (fds []int, mask uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n := 0; n < direct.FirstPollBell && len(fds) < limit; n++ {
		if b.fds[n] != 0 && sent&(1<<n) == 0 {
			fds = append(fds, b.fds[n]-1)
			mask |= 1 << n
		}
	}
	for i, fd := range poll {
		n := direct.FirstPollBell + i
		if n < direct.MaxBells && fd >= 0 && sent&(1<<n) == 0 && len(fds) < limit {
			fds = append(fds, fd)
			mask |= 1 << n
		}
	}
	return fds, mask
}

// pollBellHost is a Host whose interposer's threads in poll and select
// have bells.
type pollBellHost interface {
	// PollBells returns the kick eventfds of the interposer's threads in
	// poll and select that are bells, by slot (bell direct.FirstPollBell
	// + i; -1: not made yet). They stay open for the life of the process.
	PollBells() []int
	// PollBell returns the calling thread's bell in poll and select (its
	// slot's), or 0: it has none.
	PollBell() int
}

// keepFD keeps a duplicate of a received fd, protected and high.
func (p *Process) keepFD(fd int) (int, error) {
	d, err := dupHigh(fd)
	if err != nil {
		return -1, err
	}
	p.protect(d)
	return d, nil
}

// peerBells is what this process keeps per peer process: the peer's
// bells it holds (shared by every direct connection to that process) and
// which of its own it gave.
//
// A record outlives its last connection (idle): the peer keeps its own
// record of this process, and a record dropped here while the peer lives
// would have to be given the peer's bells again, or its wakes of the
// peer's sleepers would go over the socket (a TCP send each). Each offer
// and answer also says which of the other side's bells its sender holds
// (offerMsg.held, answerMsg.held), and that word replaces sent
// (peerHolds): a side that dropped or never had a record is given the
// bells in the next rendezvous, whatever the other side noted giving.
// Idle records go when their process is gone (looked at with their last
// connection, a second later, at releaseIdle, then less and less often)
// or, past maxIdlePeers, the longest idle first.
type peerBells struct {
	id    procID // its start is set once, under Process.bellMu (startOf)
	table *direct.Bells
	refs  int    // direct connections using table; +checklocks:Process.bellMu
	sent  uint64 // our bells the peer holds: its word (peerHolds), and what we gave since; +checklocks:Process.bellMu
	idle  int64  // when refs fell to 0 (nowNS), 0 while used; +checklocks:Process.bellMu
}

// maxIdlePeers bounds the records kept without a connection: each holds
// a fd per bell of its process.
const maxIdlePeers = 16

// peerBellsFor returns the record of peer process id, counted (release
// with unrefBells), creating it on first use; nil without memory. A
// record of another process that had the same pid is let go (it lives on
// for the connections using it).
func (p *Process) peerBellsFor(id procID) *peerBells {
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	if p.peers == nil {
		p.peers = map[int]*peerBells{}
	}
	pb := p.peers[id.pid]
	if pb != nil && id.start != 0 && pb.id.start != 0 && pb.id.start != id.start {
		delete(p.peers, id.pid)
		if pb.refs == 0 {
			pb.table.Close(p.closeFD)
		}
		pb = nil
	}
	if pb == nil {
		t := direct.NewBells()
		if t == nil {
			return nil
		}
		pb = &peerBells{id: id, table: t}
		p.peers[id.pid] = pb
	}
	if pb.id.start == 0 {
		pb.id.start = id.start
	}
	pb.refs++
	pb.idle = 0
	return pb
}

// unrefBells ends one connection's use of pb. The last leaves it idle
// (kept for the process's next connections) unless its process is gone
// already (a client that exits after its last connection); one still
// running is looked at again a second later (it often exits then, and a
// process that never goes a second without a close has no release to
// look). A record no longer in the table (another process took its pid)
// closes its bells then.
func (p *Process) unrefBells(pb *peerBells) {
	var drop []*peerBells
	p.bellMu.Lock()
	pb.refs--
	idle := pb.refs == 0 && p.peers[pb.id.pid] == pb
	if pb.refs == 0 && !idle {
		drop = append(drop, pb)
	}
	if idle {
		pb.idle = nowNS()
		drop = p.evictIdleLocked()
	}
	p.bellMu.Unlock()
	if idle {
		if p.dropIfGone(pb) {
			drop = append(drop, pb)
		} else {
			p.bellMu.Lock()
			p.lookLocked(peerCheckFirst, true)
			p.bellMu.Unlock()
		}
	}
	for _, d := range drop {
		d.table.Close(p.closeFD)
	}
}

// lookLocked has dropGonePeers run after d, unless a run is due sooner
// (soon: the runs slow down again from d) or Exit stopped them.
//
// +checklocks:p.bellMu
func (p *Process) lookLocked(d time.Duration, soon bool) {
	now := nowNS()
	due := now + int64(d)
	if p.peerCheckOff || (soon && p.peerCheckDue > now && p.peerCheckDue <= due) {
		return
	}
	if soon {
		p.peerCheckEvery = d
	}
	p.peerCheckDue = due
	if p.peerCheck == nil {
		p.peerCheck = time.AfterFunc(d, p.dropGonePeers)
	} else {
		p.peerCheck.Reset(d)
	}
}

// dropIfGone takes pb, an idle record, out of the table when its process
// is gone and reports whether it did (the caller closes its bells).
func (p *Process) dropIfGone(pb *peerBells) bool {
	p.bellMu.Lock()
	id := pb.id // its start is learnt under the lock (startOf)
	p.bellMu.Unlock()
	if id.start != 0 && rendezvous.StartTime(id.pid) == id.start {
		return false
	}
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	if pb.refs != 0 || p.peers[pb.id.pid] != pb {
		return false
	}
	delete(p.peers, pb.id.pid)
	return true
}

// idleLocked returns the records without a connection.
//
// +checklocks:p.bellMu
func (p *Process) idleLocked() []*peerBells {
	var idle []*peerBells
	for _, pb := range p.peers {
		if pb.refs == 0 {
			idle = append(idle, pb)
		}
	}
	return idle
}

// evictIdleLocked takes the longest idle records out of the table while
// more than maxIdlePeers are idle and returns them (their bells to close).
//
// +checklocks:p.bellMu
func (p *Process) evictIdleLocked() []*peerBells {
	idle := p.idleLocked()
	if len(idle) <= maxIdlePeers {
		return nil
	}
	slices.SortFunc(idle, func(a, b *peerBells) int { return cmp.Compare(a.idle, b.idle) })
	idle = idle[:len(idle)-maxIdlePeers]
	for _, pb := range idle {
		delete(p.peers, pb.id.pid)
	}
	return idle
}

// dropGonePeers closes the bells of idle records whose process is gone
// (the reaper's release, and the looks lookLocked schedules); while idle
// records of running processes remain, it looks again, twice as late
// each time.
func (p *Process) dropGonePeers() {
	p.bellMu.Lock()
	idle := p.idleLocked()
	p.bellMu.Unlock()
	for _, pb := range idle {
		if p.dropIfGone(pb) {
			pb.table.Close(p.closeFD)
		}
	}
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	if len(p.idleLocked()) == 0 {
		p.peerCheckEvery = 0
		return
	}
	p.peerCheckEvery = min(max(2*p.peerCheckEvery, peerCheckFirst), peerCheckMax)
	p.lookLocked(p.peerCheckEvery, false)
}

// While idle records of running processes are kept, dropGonePeers looks
// at them again after peerCheckFirst, then twice as long each time, up
// to peerCheckMax.
const (
	peerCheckFirst = time.Second
	peerCheckMax   = time.Minute
)

// bellsToGive returns at most max of this process's bells pb's peer was
// not given yet: the files for an offer or an answer (which stay ours),
// and their mask (gaveBells notes them given once they went).
func (p *Process) bellsToGive(pb *peerBells, max int) ([]int, uint64) {
	if pb == nil {
		return nil, 0
	}
	p.swatch.epoll(p) // its bell goes first
	p.makeSpareBell()
	var poll []int
	if h, ok := p.host.(pollBellHost); ok {
		poll = h.PollBells()
	}
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	return p.bells.unsent(pb.sent, max, poll)
}

// makeSpareBell makes the spare bell if there is none and the process
// has no epoll set.
func (p *Process) makeSpareBell() {
	p.mu.Lock()
	sets := len(p.epolls)
	p.mu.Unlock()
	if sets > 0 || !p.bells.needsSpare() {
		return
	}
	fd, err := p.newDirectEventFD()
	if err != nil {
		return
	}
	if !p.bells.addSpare(fd) {
		p.closeFD(fd) // another rendezvous made one meanwhile
	}
}

// heldBells returns the mask of pb's process's bells this process holds:
// what its offers and answers tell the peer, which gives the others.
func heldBells(pb *peerBells) uint64 {
	if pb == nil {
		return 0
	}
	return pb.table.Mask()
}

// peerHolds notes that pb's peer holds the bells of mask (its word, from
// its offer or answer), in place of what this process noted giving: a
// peer that dropped its record, or took a record of another process, is
// given them again.
func (p *Process) peerHolds(pb *peerBells, mask uint64) {
	if pb == nil {
		return
	}
	p.bellMu.Lock()
	pb.sent = mask
	p.bellMu.Unlock()
}

// gaveBells notes the bells of mask as given to pb's peer.
func (p *Process) gaveBells(pb *peerBells, mask uint64) {
	if pb == nil {
		return
	}
	p.bellMu.Lock()
	pb.sent |= mask
	p.bellMu.Unlock()
}

// startOf notes the start time of pb's process (learnt from its
// answer); false when pb is of another process (the same pid, another
// start).
func (p *Process) startOf(pb *peerBells, start uint64) bool {
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	if pb.id.start == 0 {
		pb.id.start = start
	}
	return pb.id.start == start
}

// knownPeer returns the id of process pid when this process holds a
// record of it whose start time is known.
func (p *Process) knownPeer(pid int) (procID, bool) {
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	if pb := p.peers[pid]; pb != nil && pb.id.start != 0 {
		return pb.id, true
	}
	return procID{}, false
}

// startKnown reports whether pb's process start time is known (an
// answer of it came): a record of a pid alone may be of a process gone.
func (p *Process) startKnown(pb *peerBells) bool {
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	return pb.id.start != 0
}

// takeBells keeps the peer's bells that came with an offer or an answer
// (files, by mask in increasing number; they stay the caller's: copies
// are kept).
func (p *Process) takeBells(pb *peerBells, mask uint64, files []int) {
	if pb == nil {
		return
	}
	i := 0
	for n := 0; n < direct.MaxBells && i < len(files); n++ {
		if mask&(1<<n) == 0 {
			continue
		}
		fd := files[i]
		i++
		if pb.table.Has(n) {
			continue
		}
		if k, err := p.keepFD(fd); err == nil && !pb.table.Set(n, k) {
			p.closeFD(k)
		}
	}
}
