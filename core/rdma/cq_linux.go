//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// pollBatch is how many completions one ibv_poll_cq call takes at most.
const pollBatch = 32

// completionQueue is a CQ with its completion channel. NotifyFD is an
// epoll descriptor watching the channel's fd and an eventfd ("kick"):
// verbs only signals completions that arrive after ibv_req_notify_cq,
// while the contract also wants a completion already queued at Arm time
// to fire, so Arm looks for one and kicks.
type completionQueue struct {
	p     *Provider
	cq    *C.struct_ibv_cq
	ch    *C.struct_ibv_comp_channel
	depth int
	epfd  int
	kick  int

	overrun atomic.Bool // IBV_EVENT_CQ_ERR seen, or ibv_poll_cq failed

	mu     sync.Mutex
	closed bool                   // +checklocks:mu
	wc     unsafe.Pointer         // pollBatch struct ibv_wc (scratch); +checklocks:mu
	out    cArray[wireCompletion] // pollBatch translated; +checklocks:mu
	stash  cArray[wireCompletion] // at most one, taken by Arm; +checklocks:mu
	nstash int                    // +checklocks:mu
	qps    map[uint32]*queuePair  // queue pairs completing here, by number; +checklocks:mu
}

// CreateCQ creates a completion queue of at least depth entries
// (ibv_create_comp_channel + ibv_create_cq).
func (p *Provider) CreateCQ(depth int) (verbs.CompletionQueue, error) {
	if depth <= 0 || depth > p.maxCQE {
		return nil, fmt.Errorf("rdma: CQ depth %d not in 1..%d: %w", depth, p.maxCQE, verbs.ErrInvalid)
	}
	cq := &completionQueue{p: p, depth: depth, epfd: -1, kick: -1, qps: make(map[uint32]*queuePair)}
	if err := cq.create(); err != nil {
		cq.release()
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		cq.release()
		return nil, fmt.Errorf("rdma: create CQ: %w", verbs.ErrClosed)
	}
	p.cqs[cq.cq] = cq
	return cq, nil
}

func (cq *completionQueue) create() error {
	p := cq.p
	var err error
	if cq.wc, err = callocBytes(pollBatch, C.sizeof_struct_ibv_wc); err != nil {
		return err
	}
	if cq.out, err = newCArray[wireCompletion](pollBatch); err != nil {
		return err
	}
	if cq.stash, err = newCArray[wireCompletion](1); err != nil {
		return err
	}
	ch, errno := C.ibv_create_comp_channel(p.ctx)
	if ch == nil {
		return fmt.Errorf("rdma: create CQ: ibv_create_comp_channel: %v", errno)
	}
	cq.ch = ch
	if err := unix.SetNonblock(int(ch.fd), true); err != nil {
		return fmt.Errorf("rdma: create CQ: completion channel non-blocking: %w", err)
	}
	c, errno := C.ibv_create_cq(p.ctx, C.int(cq.depth), nil, ch, 0)
	if c == nil {
		return fmt.Errorf("rdma: create CQ of %d: ibv_create_cq: %v", cq.depth, errno)
	}
	cq.cq = c
	if cq.kick, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("rdma: create CQ: eventfd: %w", err)
	}
	if cq.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("rdma: create CQ: epoll_create1: %w", err)
	}
	for _, fd := range []int{int(ch.fd), cq.kick} {
		if err := unix.EpollCtl(cq.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fmt.Errorf("rdma: create CQ: epoll_ctl: %w", err)
		}
	}
	return nil
}

// release frees whatever create made.
func (cq *completionQueue) release() {
	if cq.epfd >= 0 {
		unix.Close(cq.epfd)
	}
	if cq.kick >= 0 {
		unix.Close(cq.kick)
	}
	if cq.cq != nil {
		C.ibv_destroy_cq(cq.cq)
	}
	if cq.ch != nil {
		C.ibv_destroy_comp_channel(cq.ch)
	}
	cfree(cq.wc)
	cq.out.free()
	cq.stash.free()
}

// markOverrun records an overrun and wakes a sleeper so it polls.
func (cq *completionQueue) markOverrun() {
	cq.overrun.Store(true)
	ringEventfd(cq.kick)
}

// Poll moves up to len(out) completions into out (ibv_poll_cq). After an
// overrun it returns what it could read together with ErrCQOverrun.
func (cq *completionQueue) Poll(out []verbs.Completion) (int, error) {
	cq.mu.Lock()
	if cq.closed {
		cq.mu.Unlock()
		return 0, fmt.Errorf("rdma: poll CQ: %w", verbs.ErrClosed)
	}
	k := 0
	var idle []*queuePair // closed queue pairs whose work is all complete
	if cq.nstash > 0 && len(out) > 0 {
		if c, q, ok := cq.translate(&cq.stash.s[0]); ok {
			out[k] = c
			k++
			idle = appendIdle(idle, q)
		}
		cq.nstash = 0
	}
	var err error
	for k < len(out) {
		n := C.sdp_poll_cq(cq.cq, C.int(min(len(out)-k, pollBatch)), wcPtr(cq.wc), wcOutPtr(cq.out))
		if n < 0 {
			cq.overrun.Store(true)
			err = fmt.Errorf("rdma: poll CQ: ibv_poll_cq failed (%d): %w", int(n), verbs.ErrCQOverrun)
			break
		}
		for i := range int(n) {
			if c, q, ok := cq.translate(&cq.out.s[i]); ok {
				out[k] = c
				k++
				idle = appendIdle(idle, q)
			}
		}
		if int(n) < pollBatch {
			break
		}
	}
	cq.mu.Unlock()
	for _, q := range idle {
		q.destroyIfIdle()
	}
	if err == nil && cq.overrun.Load() {
		err = fmt.Errorf("rdma: poll CQ: %w", verbs.ErrCQOverrun)
	}
	return k, err
}

// translate finds the request a device completion belongs to.
// +checklocks:cq.mu
func (cq *completionQueue) translate(w *wireCompletion) (verbs.Completion, *queuePair, bool) {
	q := cq.qps[w.QPNum]
	if q == nil {
		return verbs.Completion{}, nil, false // a queue pair destroyed meanwhile
	}
	c, ok := q.complete(w)
	return c, q, ok
}

func appendIdle(idle []*queuePair, q *queuePair) []*queuePair {
	if q != nil && q.closing.Load() {
		idle = append(idle, q)
	}
	return idle
}

// Arm requests one notification. A completion already queued is moved
// aside for the next Poll and makes NotifyFD readable at once, without
// arming the device (an armed device would signal again on a later
// completion, long after this notification was acknowledged). Otherwise
// it arms the device (ibv_req_notify_cq) and looks again, for a
// completion that arrived in between and so raised no event.
func (cq *completionQueue) Arm() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("rdma: arm CQ: %w", verbs.ErrClosed)
	}
	if cq.peekLocked() || cq.overrun.Load() {
		ringEventfd(cq.kick)
		return nil
	}
	if rc := C.ibv_req_notify_cq(cq.cq, 0); rc != 0 {
		return fmt.Errorf("rdma: arm CQ: ibv_req_notify_cq: %v", errnoOf(rc))
	}
	if cq.peekLocked() {
		ringEventfd(cq.kick)
	}
	return nil
}

// peekLocked reports whether a completion is queued, moving one into the
// stash if none is there yet.
// +checklocks:cq.mu
func (cq *completionQueue) peekLocked() bool {
	if cq.nstash == 0 {
		n := C.sdp_poll_cq(cq.cq, 1, wcPtr(cq.wc), wcOutPtr(cq.stash))
		switch {
		case n > 0:
			cq.nstash = 1
		case n < 0:
			cq.overrun.Store(true)
		}
	}
	return cq.nstash > 0
}

// NotifyFD returns the epoll descriptor that becomes readable on
// notification.
func (cq *completionQueue) NotifyFD() int { return cq.epfd }

// AckNotify consumes pending notifications without blocking
// (ibv_get_cq_event + ibv_ack_cq_events, and the kick).
func (cq *completionQueue) AckNotify() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return fmt.Errorf("rdma: ack CQ notification: %w", verbs.ErrClosed)
	}
	drainEventfd(cq.kick)
	if rc := C.sdp_ack_cq_events(cq.ch, cq.cq); rc != 0 {
		return fmt.Errorf("rdma: ack CQ notification: ibv_get_cq_event: %v", errnoOf(rc))
	}
	return nil
}

// attach records that q completes here; false when the queue is closed.
func (cq *completionQueue) attach(q *queuePair) bool {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.closed {
		return false
	}
	cq.qps[q.num] = q
	return true
}

// detach forgets q (if it is still the queue pair of that number).
func (cq *completionQueue) detach(q *queuePair) {
	cq.mu.Lock()
	if cq.qps[q.num] == q {
		delete(cq.qps, q.num)
	}
	cq.mu.Unlock()
}

// Close destroys the queue (ibv_destroy_cq); ErrBusy while open queue
// pairs use it. Closed queue pairs still waiting for their flush
// completions to be polled are destroyed first.
func (cq *completionQueue) Close() error {
	cq.mu.Lock()
	if cq.closed {
		cq.mu.Unlock()
		return fmt.Errorf("rdma: close CQ: %w", verbs.ErrClosed)
	}
	var pending []*queuePair
	for _, q := range cq.qps {
		if !q.closing.Load() {
			cq.mu.Unlock()
			return fmt.Errorf("rdma: close CQ: queue pair %d uses it: %w", q.num, verbs.ErrBusy)
		}
		pending = append(pending, q)
	}
	cq.mu.Unlock()
	for _, q := range pending {
		q.destroy()
	}
	cq.mu.Lock()
	if len(cq.qps) > 0 || cq.closed {
		cq.mu.Unlock()
		return fmt.Errorf("rdma: close CQ: raced with a queue pair: %w", verbs.ErrBusy)
	}
	cq.closed = true
	cq.mu.Unlock()
	cq.p.mu.Lock()
	delete(cq.p.cqs, cq.cq)
	cq.p.mu.Unlock()
	// Events already read were acknowledged by AckNotify; read and
	// acknowledge the rest, or ibv_destroy_cq waits for them forever.
	C.sdp_ack_cq_events(cq.ch, cq.cq)
	rc := C.ibv_destroy_cq(cq.cq)
	cq.cq = nil
	cq.release()
	if rc != 0 {
		return fmt.Errorf("rdma: close CQ: ibv_destroy_cq: %v", errnoOf(rc))
	}
	return nil
}
