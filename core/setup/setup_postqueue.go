package setup

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// postQueue keeps one queue pair's send queue from overflowing: it counts
// requests posted and completed, signals one request every half queue so
// completions free room, and reaps the send completion queue (which it
// alone polls). Request IDs are sequence numbers: a completion with ID n
// means requests 1..n have completed (RC completions are in order).
type postQueue struct {
	qp  verbs.QueuePair
	cq  verbs.CompletionQueue
	max uint64

	mu      sync.Mutex
	posted  uint64               // +checklocks:mu
	done    uint64               // +checklocks:mu
	lastSig uint64               // +checklocks:mu
	err     error                // first failure, final; +checklocks:mu
	buf     [32]verbs.Completion // +checklocks:mu
}

func (q *postQueue) init(qp verbs.QueuePair, cq verbs.CompletionQueue, max int) {
	q.qp, q.cq, q.max = qp, cq, uint64(max)
}

// post posts the chain wr (see Link.PostData). A positive limit bounds
// the wait for room: past it post fails with ErrQueueFull.
func (q *postQueue) post(wr *verbs.SendRequest, visible bool, limit time.Duration) error {
	m := uint64(0)
	var last *verbs.SendRequest
	for w := wr; w != nil; w = w.Next {
		m++
		last = w
	}
	if m == 0 || m > q.max {
		return fmt.Errorf("post: chain of %d requests: %w", m, verbs.ErrInvalid)
	}
	var start time.Time
	q.mu.Lock()
	for i := 0; q.err == nil && q.posted-q.done+m > q.max; i++ {
		q.reapLocked()
		if q.err != nil || q.posted-q.done+m <= q.max {
			break
		}
		if limit > 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > limit {
				q.mu.Unlock()
				return fmt.Errorf("post: %d requests outstanding for %v: %w", q.posted-q.done, limit, verbs.ErrQueueFull)
			}
		}
		q.mu.Unlock()
		backoff(i)
		q.mu.Lock()
	}
	if q.err != nil {
		err := q.err
		q.mu.Unlock()
		return err
	}
	for w := wr; w != nil; w = w.Next {
		q.posted++
		w.ID = q.posted
		w.Flags &^= verbs.SendSignaled
	}
	if visible || q.posted-q.lastSig >= q.max/2 {
		last.Flags |= verbs.SendSignaled
		q.lastSig = q.posted
	}
	if _, err := q.qp.PostSend(wr); err != nil {
		if errors.Is(err, verbs.ErrClosed) {
			q.err = fmt.Errorf("post: %w", verbs.ErrClosed)
		} else {
			q.err = fmt.Errorf("post: %w (%w)", err, wire.ErrPeerGone)
		}
		err := q.err
		q.mu.Unlock()
		return err
	}
	target := q.posted
	for i := 0; visible; i++ {
		q.reapLocked()
		if q.done >= target || q.err != nil {
			break
		}
		q.mu.Unlock()
		backoff(i)
		q.mu.Lock()
	}
	err := q.err
	q.mu.Unlock()
	return err
}

// reapLocked polls the completion queue once.
//
// +checklocks:q.mu
func (q *postQueue) reapLocked() {
	for {
		n, err := q.cq.Poll(q.buf[:])
		for _, c := range q.buf[:n] {
			if c.Status != verbs.StatusSuccess && q.err == nil {
				q.err = CompletionError(c)
			}
			q.done = max(q.done, c.ID)
		}
		if err != nil && q.err == nil {
			if errors.Is(err, verbs.ErrClosed) {
				q.err = fmt.Errorf("reap: %w", verbs.ErrClosed)
			} else {
				q.err = fmt.Errorf("reap: %w (%w)", err, wire.ErrPeerGone)
			}
		}
		if n < len(q.buf) || err != nil {
			return
		}
	}
}

// failed returns the queue's error, if any.
func (q *postQueue) failed() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// close makes later posts fail with ErrClosed.
func (q *postQueue) close() {
	q.mu.Lock()
	if q.err == nil {
		q.err = fmt.Errorf("link: %w", verbs.ErrClosed)
	}
	q.mu.Unlock()
}

// backoff waits a little before attempt i+1 of a wait for completions:
// first by yielding, then in short sleeps (the completion may need the
// peer's software NIC to wake up).
func backoff(i int) {
	if i < 64 {
		runtime.Gosched()
		return
	}
	time.Sleep(20 * time.Microsecond)
}
