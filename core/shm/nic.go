package shm

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// The software NIC: one goroutine per connected queue pair. It consumes
// the inbound ring (matching records to posted receives), takes the peer's
// acknowledgements, executes send requests that had to wait, watches the
// side channel for region announcements and EOF, and applies requested
// failures. When it finds nothing to do it arms its doorbell (a local flag
// for kicks from this process, the sleeping word in its control area for
// the peer), checks once more, and sleeps in epoll_wait on its eventfd and
// the side channel, so an idle queue pair costs no CPU. Whoever makes work
// for it (the peer, a local PostRecv, a CQ overrun, Close) publishes the
// work first and rings only when it finds the doorbell armed; all these
// words are sequentially consistent atomics, so arm-check-sleep loses no
// wakeup.

// startNIC starts the NIC goroutine; Connect calls it once the peer's
// resources are in place.
func (q *queuePair) startNIC() {
	q.nicDone = make(chan struct{})
	go q.runNIC()
}

// stopNIC stops the NIC goroutine and waits for it.
func (q *queuePair) stopNIC() {
	if q.nicDone == nil {
		return
	}
	q.stopping.Store(true)
	ringEventfd(q.efd)
	<-q.nicDone
}

func (q *queuePair) runNIC() {
	defer close(q.nicDone)
	q.flushBacklog() // announcements made while the side channel was full
	for !q.stopping.Load() {
		q.nicProgress()
		if q.spinForWork() {
			continue
		}
		q.asleep.Store(1)
		q.my.sleeping.Store(1)
		if q.nicHasWork() {
			q.disarm()
			continue
		}
		n, err := q.nicWait()
		q.disarm()
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			q.fail(verbs.StatusRetryExceeded) // cannot wait any more
			return
		}
		for _, ev := range q.nicEv[:n] {
			switch int(ev.Fd) {
			case q.efd:
				drainEventfd(q.efd)
			case q.rx:
				q.onSideChannel(ev.Events)
			case q.keep:
				q.onKeepWritable(ev.Events)
			}
		}
	}
}

// nicWait sleeps until the NIC's epoll set has events and returns them
// (in q.nicEv), parked in the Go runtime's poller (wait.ParkFD: the epoll
// fd is itself pollable), not blocked in epoll_wait.
func (q *queuePair) nicWait() (int, error) {
	q.nicN, q.nicErr = 0, nil
	if werr := q.epPark.Wait(time.Time{}); werr != nil && q.nicErr == nil {
		return q.nicN, werr
	}
	return q.nicN, q.nicErr
}

// nicReady is epPark's readiness check: it takes the epoll set's events
// into q.nicEv without blocking. Only the NIC goroutine waits on epPark.
func (q *queuePair) nicReady(fd int) bool {
	q.nicN, q.nicErr = unix.EpollWait(fd, q.nicEv[:], 0)
	return q.nicN > 0 || (q.nicErr != nil && q.nicErr != unix.EINTR)
}

// nicSpin is how many times the NIC goroutine looks for work, yielding the
// processor in between, before it arms its doorbell and sleeps: a few
// microseconds that save a sleep and a wakeup (tens of microseconds here)
// when traffic is flowing, and cost nothing measurable when idle.
const nicSpin = 32

// spinForWork polls for work without arming; it reports whether it found some.
func (q *queuePair) spinForWork() bool {
	for i := 0; i < nicSpin; i++ {
		if q.nicHasWork() {
			return true
		}
		runtime.Gosched()
	}
	return false
}

func (q *queuePair) disarm() {
	q.asleep.Store(0)
	q.my.sleeping.Store(0)
}

// nicProgress does all work that is ready.
func (q *queuePair) nicProgress() {
	q.kick.Store(0)
	if q.failPending.Load() {
		q.fail(verbs.StatusFlushed)
	}
	if verbs.QPState(q.state.Load()) != verbs.QPReady {
		return
	}
	q.inMu.Lock()
	q.processInbound()
	q.inMu.Unlock()
	q.sqMu.Lock()
	q.progressSendLocked()
	q.sqMu.Unlock()
}

// nicHasWork is the check between arming and sleeping: it reads every
// word whose change would need the NIC goroutine.
func (q *queuePair) nicHasWork() bool {
	if q.kick.Load() != 0 || q.failPending.Load() || q.stopping.Load() {
		return true
	}
	if verbs.QPState(q.state.Load()) != verbs.QPReady {
		return false
	}
	if q.peer.state.Load() != q.peerStateSeen.Load() {
		return true
	}
	return q.pollHasWork()
}

// pollHasWork reports, without locks, whether a ready queue pair may have
// inbound blocks to process or acknowledgements to take (pollProgress's
// work; it checks again under its locks).
func (q *queuePair) pollHasWork() bool {
	if verbs.QPState(q.state.Load()) != verbs.QPReady {
		return false
	}
	// my.cons is in.cons whenever no consumer is inside processInbound.
	if q.my.prod.Load() != q.my.cons.Load() && !(q.inBlocked.Load() && q.rqCount.Load() == 0) {
		return true
	}
	return q.sqBusy.Load() && q.peer.cons.Load() != q.ackedPos.Load()
}

// onSideChannel handles epoll events on the side channel: announcements,
// and EOF or hang-up when the peer's queue pair or process is gone.
func (q *queuePair) onSideChannel(events uint32) {
	q.sqMu.Lock()
	gone, bad := q.drainAnnouncements()
	q.sqMu.Unlock()
	if !gone && !bad && events&(unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) == 0 {
		return
	}
	// Level-triggered: stop watching a dead or broken channel.
	unix.EpollCtl(q.epfd, unix.EPOLL_CTL_DEL, q.rx, nil)
	if !bad {
		q.fail(verbs.StatusRetryExceeded)
	}
}

// onKeepWritable flushes the announcement backlog when the side channel
// has room again; when the peer's end is gone the backlog is dropped.
func (q *queuePair) onKeepWritable(events uint32) {
	q.annMu.Lock()
	if events&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		q.dropBacklog()
	}
	q.flushBacklogLocked()
	q.annMu.Unlock()
}

// kickNIC hands local work to the NIC goroutine, waking it if it sleeps.
func (q *queuePair) kickNIC() {
	q.kick.Store(1)
	if q.asleep.Load() == 1 && q.asleep.CompareAndSwap(1, 0) {
		ringEventfd(q.efd)
	}
}

// ringPeer wakes the peer's NIC goroutine if it armed its doorbell. It is
// called after publishing whatever the peer should see.
func (q *queuePair) ringPeer() {
	if q.peer.sleeping.Load() == 1 && q.peer.sleeping.CompareAndSwap(1, 0) {
		ringEventfd(q.peerEfd)
	}
}
