package shm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// completionQueue is a bounded ring of completions with an eventfd as its
// completion channel. Producers are posting goroutines and NIC goroutines;
// Poll is called by one consumer at a time.
type completionQueue struct {
	p   *Provider
	efd int           // notification eventfd (non-blocking); owned
	ch  chan struct{} // notifications in this process (verbs.NotifyChanner); capacity 1

	mu      sync.Mutex
	ring    []verbs.Completion // +checklocks:mu
	head    int                // oldest entry; +checklocks:mu
	n       int                // entries queued; +checklocks:mu
	armed   bool               // next push notifies; +checklocks:mu
	overrun bool               // sticky; +checklocks:mu
	closed  bool               // +checklocks:mu

	qpMu   sync.Mutex
	qps    map[*queuePair]struct{}      // queue pairs using the queue; +checklocks:qpMu
	qpList atomic.Pointer[[]*queuePair] // qps as a list for progress, replaced (never changed) under qpMu

	progMu sync.Mutex // one progress at a time
}

func newCompletionQueue(p *Provider, depth int) (*completionQueue, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("shm: create CQ: eventfd: %w", err)
	}
	noteFDs(efd)
	return &completionQueue{
		p:    p,
		efd:  efd,
		ch:   make(chan struct{}, 1),
		ring: make([]verbs.Completion, depth),
		qps:  make(map[*queuePair]struct{}),
	}, nil
}

// push appends c. On overrun the completion is lost, Poll reports
// ErrCQOverrun from then on, and every queue pair using the queue is asked
// to move to QPError (asynchronously: the caller may hold its locks).
func (cq *completionQueue) push(c verbs.Completion) {
	cq.mu.Lock()
	if cq.closed || cq.overrun {
		cq.mu.Unlock()
		return
	}
	if cq.n == len(cq.ring) {
		cq.overrun = true
		cq.notifyLocked()
		cq.mu.Unlock()
		cq.qpMu.Lock()
		for q := range cq.qps {
			q.requestFail()
		}
		cq.qpMu.Unlock()
		return
	}
	i := cq.head + cq.n
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = c
	cq.n++
	cq.notifyLocked()
	cq.mu.Unlock()
}

// notifyLocked fires a pending Arm.
func (cq *completionQueue) notifyLocked() {
	if cq.armed {
		cq.armed = false
		ringEventfd(cq.efd)
		select {
		case cq.ch <- struct{}{}:
		default:
		}
	}
}

// Poll moves up to len(out) completions into out, oldest first. After an
// overrun it still returns what was queued, together with ErrCQOverrun.
// Finding the queue empty, it first does the ready work of the queue
// pairs using it (queuePair.pollProgress), then looks again.
func (cq *completionQueue) Poll(out []verbs.Completion) (int, error) {
	k, err := cq.take(out)
	if k > 0 || err != nil || len(out) == 0 || !cq.progress() {
		return k, err
	}
	return cq.take(out)
}

// progress runs pollProgress on every queue pair using the queue; it
// reports false when another poller is already doing so.
func (cq *completionQueue) progress() bool {
	if !cq.progMu.TryLock() {
		return false
	}
	defer cq.progMu.Unlock()
	if l := cq.qpList.Load(); l != nil {
		for _, q := range *l {
			if q.pollHasWork() {
				q.pollProgress()
			}
		}
	}
	return true
}

// take is Poll without progress.
func (cq *completionQueue) take(out []verbs.Completion) (int, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return 0, fmt.Errorf("shm: poll CQ: %w", verbs.ErrClosed)
	}
	k := 0
	for k < len(out) && cq.n > 0 {
		out[k] = cq.ring[cq.head]
		k++
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
		cq.n--
	}
	if cq.overrun {
		return k, verbs.ErrCQOverrun
	}
	return k, nil
}

// Arm requests one notification; with completions already queued (or after
// an overrun) NotifyFD becomes readable at once.
func (cq *completionQueue) Arm() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("shm: arm CQ: %w", verbs.ErrClosed)
	}
	cq.armed = true
	if cq.n > 0 || cq.overrun {
		cq.notifyLocked()
	}
	return nil
}

// NotifyFD returns the eventfd that becomes readable on notification.
func (cq *completionQueue) NotifyFD() int { return cq.efd }

// NotifyChan returns the channel that receives every notification.
func (cq *completionQueue) NotifyChan() <-chan struct{} { return cq.ch }

// AckNotify consumes a pending notification without blocking.
func (cq *completionQueue) AckNotify() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("shm: ack CQ notification: %w", verbs.ErrClosed)
	}
	drainEventfd(cq.efd)
	select {
	case <-cq.ch:
	default:
	}
	return nil
}

// Close destroys the queue; it returns ErrBusy while queue pairs use it.
func (cq *completionQueue) Close() error {
	cq.qpMu.Lock()
	if n := len(cq.qps); n > 0 {
		cq.qpMu.Unlock()
		return fmt.Errorf("shm: close CQ: %d queue pairs use it: %w", n, verbs.ErrBusy)
	}
	cq.mu.Lock()
	wasClosed := cq.closed
	cq.closed = true
	cq.mu.Unlock()
	cq.qpMu.Unlock()
	if wasClosed {
		return fmt.Errorf("shm: close CQ: %w", verbs.ErrClosed)
	}
	cq.p.forgetCQ(cq)
	closeRaw(cq.efd)
	return nil
}

// release frees a queue that was never published.
func (cq *completionQueue) release() { closeRaw(cq.efd) }

// attach records that q uses the queue; false when the queue is closed.
// Lock order: qpMu before mu.
func (cq *completionQueue) attach(q *queuePair) bool {
	cq.qpMu.Lock()
	defer cq.qpMu.Unlock()
	cq.mu.Lock()
	closed := cq.closed
	cq.mu.Unlock()
	if !closed {
		cq.qps[q] = struct{}{}
		cq.publishLocked()
	}
	return !closed
}

// detach forgets q; after it returns the queue no longer calls into q.
func (cq *completionQueue) detach(q *queuePair) {
	cq.qpMu.Lock()
	delete(cq.qps, q)
	cq.publishLocked()
	cq.qpMu.Unlock()
	// A poller that loaded the old list may still be looking at q
	// (progress holds progMu while it iterates): once it is done, no
	// one can reach q through this queue, and Close may free it.
	cq.progMu.Lock()
	cq.progMu.Unlock() //nolint:staticcheck // an empty critical section: a barrier
}

// publishLocked replaces qpList with the current qps.
//
// +checklocks:cq.qpMu
func (cq *completionQueue) publishLocked() {
	l := make([]*queuePair, 0, len(cq.qps))
	for q := range cq.qps {
		l = append(l, q)
	}
	cq.qpList.Store(&l)
}
