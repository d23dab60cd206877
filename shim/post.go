package shim

import (
	"net/netip"
	"time"
	"unsafe" // and go:linkname

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/sockdiag"
)

// Posted offers (core/direct/post.go). A rendezvous connection per offer
// cost a connection's setup two sockets, two connects, a message each
// way with their wakes and the acceptor's intake (docs/direct.md, "Where
// a connection's setup goes"). Two processes that share a slab share
// memory already, so a connector offers an area of a slab the acceptor
// has mapped through the area's post instead, when nothing needs a
// rendezvous message: the acceptor holds every bell this process would
// give it (the offer would carry no files), and the connect() blocks
// (a nonblocking one's readiness goes through the rendezvous connection,
// see below). Everything else (a pair's first connection, a deferred
// one, another namespace's) takes the rendezvous connection as before.
//
//   - The connector announces the offer before its connect() and binds it
//     with the port the connect() picked right after (postOffer,
//     postBound); the acceptor's accept() looks for the 4-tuple in the
//     posts of the slabs it maps before it asks its rendezvous node
//     (claimPost), claims the offer with a compare and swap and answers
//     in the post: accepted (its start time and the bells it holds) or
//     declined. It wakes a connector thread that sleeps on the post and
//     rings the bells the connector's poll and epoll sleeps armed there.
//   - An acceptor whose accept() comes before the port (the kernel
//     completes a loopback connection inside the connector's connect())
//     waits for the announced offers to its address for postBindWait;
//     still unbound, it asks the kernel which socket is at the other end
//     (sockdiag.Peer) and waits up to postOwnWait for that socket's
//     offer alone (an unbound offer carries its socket's inode).
//   - The connector's calls that need the verdict read the post
//     (settlePostLocked); blocking ones sleep on its state word, for
//     watchSlice at a time. An offer still unclaimed after postExpiry,
//     or whose acceptor process is gone, or whose kernel connection
//     ended (a listener closed with it in its queue) is withdrawn with a
//     compare and swap: the connection is then plain on both sides, and
//     the bytes written into the area go to the kernel socket. A close
//     or shutdown before the verdict finishes once the verdict is there
//     or the offer withdrawn (fdops.go, closeBeforeVerdict).
//   - Validation: the acceptor only compares the post's addresses, and
//     its masks mean what an offer's do; the connector takes any state
//     but those of an offer and an acceptance as a decline.

// postBindWait bounds an accept()'s wait for announced offers to its
// address to be bound before it asks whose connection it has.
const postBindWait = 200 * time.Microsecond

// postOwnWait bounds the wait for the bind of the announced offer whose
// socket the kernel says is at the other end: that connector is between
// its connect() and the bind, and gets there unless it died or starves.
const postOwnWait = time.Second

// postFresh: an announced offer older than this belongs to a connect()
// the kernel has not completed, not to a connection being accepted.
const postFresh = 200 * time.Millisecond

// postExpiry is how long an offer waits to be claimed, as a rendezvous
// offer waits (rendezvous.DefaultPendingTimeout).
const postExpiry = rendezvous.DefaultPendingTimeout

// monoNS is CLOCK_MONOTONIC in ns, the clock posts share between
// processes: the runtime's own reading of it (the vDSO, no system call;
// unix.ClockGettime makes one, with the runtime's bookkeeping around it,
// about 1 us a reading on the 2-core VM, and a connection's setup reads
// it two to four times).
func monoNS() int64 { return nanotime() }

// nanotime is CLOCK_MONOTONIC in ns (runtime/time_nofake.go keeps it for
// packages that link to it).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// offerPost offers ds's area through its post when it may (above): fd
// is the connector's socket, blocking (the socket's O_NONBLOCK as the
// core keeps it: Process.offer), t's client port may still be 0, bells
// are the connector's bells the offer would give (none may be left).
// nil: take the rendezvous connection.
func (p *Process) offerPost(ds *directStream, t rendezvous.Tuple, fd int, bells uint64, acceptor string) *pendingConnect {
	if bells != 0 || ds.where.own == nil || fd < 0 || !p.areas.mapped(ds.where.own, acceptor) {
		return nil
	}
	po := ds.where.own.s.Post(ds.where.i)
	if po == nil {
		return nil
	}
	switch po.State() {
	case direct.PostFree:
	case direct.PostAccepted, direct.PostDeclined:
		// The verdict of an earlier connection of the area that this
		// side never read (it gave the connection up): both sides have
		// let the area go since, so the post is free.
		po.Free()
		ds.where.own.s.Offers(-1)
	default:
		return nil
	}
	ino, err := sockdiag.Inode(fd)
	if err != nil {
		return nil
	}
	ds.where.own.s.Offers(1)
	po.Announce(t.Client, t.Server, ino, heldBells(ds.peer), monoNS())
	pc := &pendingConnect{post: po, direct: ds, id: 1, unanswered: true, unbound: t.Client.Port() == 0, acceptor: acceptor}
	if !ds.where.own.s.Mapped() {
		// The acceptor let the slab go (direct.Slab.Unmapping): the
		// rendezvous connection carries it again.
		withdrawPost(pc)
		p.areas.learnMapped(ds.where.own, "")
		return nil
	}
	p.count("offer.posted")
	return pc
}

// withdrawPost takes back pc's offer while nobody claimed it; false when
// the acceptor did (its verdict is there, or about to be).
func withdrawPost(pc *pendingConnect) bool {
	po := pc.post
	if po.Swap(direct.PostAnnounced, direct.PostFree) || po.Swap(direct.PostOffered, direct.PostFree) {
		pc.direct.where.own.s.Offers(-1)
		return true
	}
	return false
}

// endDataWait withdraws the area sleep of a receive that waited for the
// acceptor's first bytes (settlePostLocked), once its thread is back or
// the offer ends.
func (pc *pendingConnect) endDataWait() {
	if sl := pc.dataSleep; sl != nil {
		pc.dataSleep = nil
		pc.direct.conn.Woke(sl)
	}
}

// freePost ends pc's use of its post after the verdict.
func freePost(pc *pendingConnect) {
	pc.post.Free()
	pc.direct.where.own.s.Offers(-1)
}

// postDataWait bounds a blocking receive's first wait for a posted
// offer's verdict, which sleeps for the acceptor's first bytes rather
// than for the verdict (settlePostLocked).
const postDataWait = time.Millisecond

// settlePostLocked is settleLocked for an offer through a post: the
// verdict, or the post's state to wait on.
//
// A blocking receive (recv) first waits in the area instead, for the
// acceptor's first bytes, at most postDataWait, and the acceptor's
// accept() does not wake it: a request's answer then ends the wait for
// both the verdict and the data with one wake, where a wake for the
// verdict and one for the answer cost the connector's thread two
// sleeps. An acceptor that sends nothing by then, a decline, a
// withdrawal, or an acceptor that died find the receive after that
// wait, which then sleeps on the post as other calls do.
//
// +checklocks:s.mu
func (s *Socket) settlePostLocked(pc *pendingConnect, recv bool) settleResult {
	pc.endDataWait()
	po := pc.post
	switch st := po.State(); st {
	case direct.PostAccepted:
		start, held := po.Answered()
		data := answerMsg{id: 1, start: start, held: held}.encode()
		freePost(pc)
		if err := pc.direct.answered(rendezvous.Payload{Data: data}); err != nil {
			s.p.count("answer.malformed")
		}
		return s.settledLocked(pc)
	case direct.PostAnnounced, direct.PostOffered, direct.PostTaken:
		if st != direct.PostTaken && s.postGiveUpLocked(pc, recv && !pc.dataWaited) && withdrawPost(pc) {
			return s.declinedPostLocked(pc, rendezvous.ReasonTimeout)
		}
		if recv && !pc.dataWaited {
			pc.dataWaited = true
			sl := pc.direct.conn.PrepareSleep(false)
			if sl == nil { // bytes or an end are there: the verdict too
				return s.settlePostLocked(pc, recv)
			}
			pc.dataSleep = sl
			return settleResult{waitFD: s.fds[0], waitEvents: unix.POLLRDHUP, waitWord: sl.Word, waitVal: sl.Val, waitFor: postDataWait}
		}
		return settleResult{waitFD: s.fds[0], waitEvents: unix.POLLRDHUP, waitWord: po.StateWord(), waitVal: st, waitPost: po}
	default: // declined, or a state no acceptor writes
		freePost(pc)
		return s.declinedPostLocked(pc, rendezvous.ReasonRefused)
	}
}

// sleeping tells the acceptor that a thread is about to sleep on r's
// post (Post.Wait: its verdict then wakes the state word) and reports
// whether the state is still the one r waits on; false: settle again
// rather than sleep. Only a thread that sleeps says so: a look at the
// verdict that goes on without it (an early write's) would have the
// acceptor make a futex call for nobody.
func (r settleResult) sleeping() bool {
	if r.waitPost == nil {
		return true
	}
	r.waitPost.Wait()
	return r.waitPost.State() == r.waitVal
}

// postGiveUpLocked says whether pc's offer is to be withdrawn: unclaimed
// for postExpiry, or its kernel connection ended (the listener closed
// with it in its queue, the acceptor process died). soon: the caller
// looks again within postDataWait (a receive's first wait), and the
// kernel connection is asked then.
//
// +checklocks:s.mu
func (s *Socket) postGiveUpLocked(pc *pendingConnect, soon bool) bool {
	if monoNS()-pc.post.Announced() > int64(postExpiry) {
		return true
	}
	if soon {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(s.fds[0]), Events: unix.POLLRDHUP}}
	n, _ := unix.Poll(pfd, 0)
	return n > 0
}

// declinedPostLocked makes s plain after its posted offer was declined or
// withdrawn: the bytes written into the area go to the kernel socket.
//
// +checklocks:s.mu
func (s *Socket) declinedPostLocked(pc *pendingConnect, r rendezvous.Reason) settleResult {
	s.takeBackEarlyLocked(pc.direct)
	pc.direct.abandon()
	s.pend = nil
	s.p.fallback(r, s.fds[0], logrus.Fields{"remote": pc.dst}, errDeclined)
	s.fallBackLocked()
	return settleResult{fallback: true}
}

// armPost has the acceptor ring bell with the verdict of s's posted
// offer, for a poll or epoll sleep of this process that waits for it. A
// sleep whose bell the acceptor does not hold (its set or thread came
// after the pair's last rendezvous) or without one (0: the process ran
// out of them) is woken by the goroutine that waits on the post for the
// early bytes' sake (pushEarly), started here if need be. It reports
// whether s has a posted offer (its readiness is to be asked again: the
// verdict may have come before the arm).
func (s *Socket) armPost(bell int) bool {
	if s.getState() != sockConnecting {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.pend
	if pc == nil || pc.post == nil || s.getState() != sockConnecting || len(s.fds) == 0 {
		return false
	}
	if bell > 0 && s.p.peerHoldsBell(pc.direct.peer, bell) {
		pc.post.Arm(bell)
	} else {
		s.startPushLocked()
	}
	return true
}

// peerHoldsBell reports whether the peer process of pb holds this
// process's bell n (it was given in a rendezvous).
func (p *Process) peerHoldsBell(pb *peerBells, n int) bool {
	if pb == nil || n <= 0 || n >= direct.MaxBells {
		return false
	}
	p.bellMu.Lock()
	defer p.bellMu.Unlock()
	return pb.sent&(1<<n) != 0
}

// pendingPost returns s's posted offer while its verdict is pending.
func (s *Socket) pendingPost() *direct.Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.pend; pc != nil && s.getState() == sockConnecting {
		return pc.post
	}
	return nil
}

// waitPost waits, on its post's state word, until s's posted offer po
// has its verdict and s is settled, or until deadline.
func (s *Socket) waitPost(po *direct.Post, deadline time.Time) {
	for time.Now().Before(deadline) {
		s.mu.Lock()
		var r settleResult
		if s.getState() == sockConnecting && s.pend != nil && s.pend.post == po && len(s.fds) > 0 {
			r = s.settleLocked()
			for !r.sleeping() {
				r = s.settleLocked()
			}
		}
		s.mu.Unlock()
		if r.waitWord == nil {
			return
		}
		futexWait(r.waitWord, r.waitVal, min(watchSlice, time.Until(deadline)))
	}
}

// futexWait sleeps while *word holds val, for at most d (shared: the
// word is in memory another process writes and wakes).
func futexWait(word *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(max(d, 0)))
	const futexWaitOp = 0
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// claimPost looks for the posted offer of the connection local <- remote
// among the slabs of peers mapped here, claims it and answers it; nil
// when there is none.
func (p *Process) claimPost(local, remote netip.AddrPort) *prepared {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	var began, since int64 // the first look takes announced offers of any age: the clock is read only if one is there
	var own uint32         // the inode of the socket at the other end, once asked
	for {
		ps, i, unbound := p.areas.claimOffer(local, remote, own, since)
		if ps != nil {
			return p.acceptPosted(ps, i, local)
		}
		if !unbound {
			return nil
		}
		now := monoNS()
		if began == 0 {
			began, since = now, now-int64(postFresh)
		}
		waited := time.Duration(now - began)
		switch {
		case own == 0 && waited > postBindWait:
			ino, _, err := sockdiag.Peer(local, remote)
			if err != nil || ino == 0 {
				return nil
			}
			own = ino
		case own != 0 && waited > postOwnWait:
			return nil
		case waited > postBindWait:
			time.Sleep(20 * time.Microsecond)
		default:
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

// acceptPosted answers the offer in slot i of ps, which this process
// claimed (areaPool.claimOffer): the acceptor's side of the area, or a
// decline.
func (p *Process) acceptPosted(ps *peerSlab, i int, local netip.AddrPort) *prepared {
	po := ps.s.Post(i)
	answer := func(state uint32, start, held uint64) {
		armed := po.Armed()
		po.Answer(state, start, held)
		if po.Waited() {
			futexWake(po.StateWord())
		}
		if armed != 0 {
			if pb := p.peerBellsFor(ps.from); pb != nil {
				pb.table.Ring(armed)
				p.unrefBells(pb)
			}
		}
	}
	decline := func() *prepared {
		answer(direct.PostDeclined, 0, 0)
		p.count("offer.posted_declined")
		return nil
	}
	a, where, err := p.areas.takeClaimed(ps, i)
	if err != nil {
		defer p.areas.unpin(ps)
		return decline()
	}
	c, err := direct.Open(a, 1)
	if err != nil {
		defer p.areas.putPeer(p, where, a, false)
		return decline()
	}
	ds := &directStream{p: p, conn: c, peerPID: ps.from.pid, side: 1, where: where}
	ds.setPolicy()
	ds.bindBells(ps.from)
	ds.holdWatcher()
	p.peerHolds(ds.peer, po.Held())
	ds.SetRcvBuf(p.listenerRcvBuf(local))
	answer(direct.PostAccepted, p.self.start, heldBells(ds.peer))
	p.count("offer.posted_claimed")
	return &prepared{direct: ds}
}
