package shm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
)

// queuePair is a reliable-connected queue pair. Lock order: inMu, sqMu,
// rqMu, annMu, region locks, CQ locks; Provider.mu comes
// before annMu and is never taken while holding sqMu or rqMu, nor is the
// registry lock.
type queuePair struct {
	p      *Provider
	num    uint32 // set before the queue pair is published
	sendCQ *completionQueue
	recvCQ *completionQueue
	lim    qpLimits
	nonce  uint64 // identifies the queue pair's Endpoint inside this process
	epData []byte // LocalEndpoint data, immutable once published

	state       atomic.Uint32 // verbs.QPState; changes hold sqMu
	failPending atomic.Bool   // a CQ overrun asked for QPError

	// Own resources, from creation to Close.
	my   area // own control area: the inbound ring
	efd  int  // own eventfd: rung by the peer and by local kicks
	keep int  // own side-channel end: region announcements go out here

	// Peer resources: set by Connect under sqMu, rqMu and annMu before the
	// NIC goroutine starts, released by Close after it stopped.
	peer    area // the peer's control area: the outbound ring
	peerEfd int  // the peer's eventfd
	rx      int  // the peer's side-channel end: announcements in, EOF when gone
	epfd    int
	epPark  *wait.ParkFD       // the NIC goroutine's wait on epfd (owns epfd once connected)
	nicEv   [4]unix.EpollEvent // epfd's events for the NIC goroutine (nicReady)
	nicN    int
	nicErr  error
	nicDone chan struct{}

	stopping atomic.Bool
	asleep   atomic.Uint32 // the NIC goroutine is armed to sleep
	kick     atomic.Uint32 // local work is waiting for the NIC goroutine
	fence    atomic.Uint32 // full barrier word, private to avoid a global hot line

	sqMu          sync.Mutex
	sq            sendQueue     // +checklocks:sqMu
	sqBusy        atomic.Bool   // mirror of "sq holds entries" for the NIC's idle check
	ackedPos      atomic.Uint64 // mirror of sq.acked
	peerStateSeen atomic.Uint32 // last peer wire state the send side acted on

	rqMu    sync.Mutex
	rq      recvQueue // +checklocks:rqMu
	rqCount atomic.Int32

	// The inbound ring's consumer: the NIC goroutine, or a poller of one
	// of the queue pair's completion queues (pollProgress).
	inMu      sync.Mutex
	in        inbound     // +checklocks:inMu
	inBlocked atomic.Bool // mirror of in.blocked for the NIC's idle check

	annRecv atomic.Uint32 // announcements received from the peer; changes hold sqMu

	// Peer regions. Every use and every change holds sqMu: one-sided work
	// only runs under it, and the NIC goroutine takes it to drain.
	remote     map[uint32]*remoteRegion // by key; +checklocks:sqMu
	lastKey    uint32                   // one-entry lookup cache; +checklocks:sqMu
	lastRemote *remoteRegion            // +checklocks:sqMu

	annMu       sync.Mutex
	backlog     []announcement // announcements the side channel had no room for; +checklocks:annMu
	keepWatched bool           // keep is in the NIC's epoll set for EPOLLOUT; +checklocks:annMu

	give []int // Endpoint files while owned; +checklocks:registry.mu
}

// newQueuePair allocates a queue pair and its own resources.
func newQueuePair(p *Provider, scq, rcq *completionQueue, lim qpLimits) (q *queuePair, err error) {
	q = &queuePair{
		p: p, sendCQ: scq, recvCQ: rcq, lim: lim,
		efd: -1, keep: -1, peerEfd: -1, rx: -1, epfd: -1,
		remote: make(map[uint32]*remoteRegion),
	}
	q.sq.init(lim)
	q.rq.init(lim)
	defer func() {
		if err != nil {
			q.release()
		}
	}()
	ctlFD, mem, err := createSealedMemfd("sdpshim-qp", ctlSize)
	if err != nil {
		return nil, fmt.Errorf("shm: create QP: %w", err)
	}
	q.give = append(q.give, ctlFD)
	q.my = newArea(mem)
	q.my.initHeader()
	if q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		q.efd = -1
		return nil, fmt.Errorf("shm: create QP: eventfd: %w", err)
	}
	noteFDs(q.efd)
	evDup, err := unix.FcntlInt(uintptr(q.efd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: create QP: dup eventfd: %w", err)
	}
	noteFDs(evDup)
	q.give = append(q.give, evDup)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shm: create QP: socketpair: %w", err)
	}
	noteFDs(sp[0], sp[1])
	q.keep = sp[0]
	q.give = append(q.give, sp[1])
	return q, nil
}

// finishCreate publishes the queue pair's Endpoint once its number is set.
func (q *queuePair) finishCreate() {
	q.nonce = nextNonce.Add(1)
	q.epData = encodeEndpoint(q)
	registerEndpoint(q)
}

// release frees the own resources of a queue pair that never got a peer.
func (q *queuePair) release() {
	closeFDs(q.give)
	q.give = nil
	if q.my.mapped() {
		unix.Munmap(q.my.mem)
		q.my = area{}
	}
	closeFD(&q.efd)
	closeFD(&q.keep)
}

// Number returns the queue pair number, unique within the provider.
func (q *queuePair) Number() uint32 { return q.num }

// State returns the current state; a requested but not yet applied move to
// QPError already reads as QPError.
func (q *queuePair) State() verbs.QPState {
	s := verbs.QPState(q.state.Load())
	if (s == verbs.QPInit || s == verbs.QPReady) && q.failPending.Load() {
		return verbs.QPError
	}
	return s
}

// Close flushes outstanding requests with StatusFlushed, tells the peer
// (its queue pair moves to QPError), stops the NIC goroutine and releases
// every descriptor and mapping.
func (q *queuePair) Close() error {
	q.sqMu.Lock()
	if verbs.QPState(q.state.Load()) == verbs.QPClosed {
		q.sqMu.Unlock()
		return fmt.Errorf("shm: close QP %d: %w", q.num, verbs.ErrClosed)
	}
	q.state.Store(uint32(verbs.QPClosed))
	q.flushSendLocked(verbs.StatusFlushed)
	q.my.state.Store(wireClosed)
	if q.peer.mapped() {
		q.ringPeer()
	}
	q.sqMu.Unlock()
	q.flushRecv()

	q.p.forgetQP(q)
	q.sendCQ.detach(q)
	q.recvCQ.detach(q)
	unregisterEndpoint(q)
	q.stopNIC()

	// Every entry point checks QPClosed under the lock it holds, and the NIC
	// goroutine has exited: nothing uses the resources any more.
	q.inMu.Lock()
	q.sqMu.Lock()
	q.rqMu.Lock()
	q.annMu.Lock()
	q.dropBacklog()
	for k, rr := range q.remote {
		unix.Munmap(rr.mem)
		delete(q.remote, k)
	}
	if q.peer.mapped() {
		unix.Munmap(q.peer.mem)
		q.peer = area{}
	}
	closeFD(&q.peerEfd)
	closeFD(&q.rx)
	if q.epPark != nil {
		q.epPark.Close()
		q.epPark, q.epfd = nil, -1
	} else {
		closeFD(&q.epfd)
	}
	q.release()
	q.lastRemote = nil
	q.annMu.Unlock()
	q.rqMu.Unlock()
	q.sqMu.Unlock()
	q.inMu.Unlock()
	return nil
}

// pollProgress does, on a goroutine polling one of the queue pair's
// completion queues and finding it empty, the NIC work whose completions
// it may be waiting for: it consumes the inbound ring (receive
// completions) and takes the peer's acknowledgements (send completions),
// so that completions do not wait for the NIC goroutine to be scheduled.
// It never blocks: work another goroutine is doing is left to it. Waiting
// send requests are left to the NIC goroutine, which it kicks.
func (q *queuePair) pollProgress() {
	if q.inMu.TryLock() {
		if verbs.QPState(q.state.Load()) == verbs.QPReady && q.my.prod.Load() != q.in.cons &&
			!(q.in.blocked && q.rqCount.Load() == 0) {
			q.processInbound()
		}
		q.inMu.Unlock()
	}
	if q.sqBusy.Load() && q.sqMu.TryLock() {
		if verbs.QPState(q.state.Load()) == verbs.QPReady && q.sq.peerReady && q.peer.cons.Load() != q.sq.acked {
			if q.ackLocked() && q.sq.exec != q.sq.tail {
				q.kickNIC()
			}
		}
		q.sqMu.Unlock()
	}
}
