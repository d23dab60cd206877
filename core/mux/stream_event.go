package mux

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// streamEvent is an in-process notification: a generation counter that
// signal bumps, and a channel closed at each signal for whoever waits.
// A waiter reads the generation, checks its condition, and waits for the
// generation to move: no signal is lost in between.
type streamEvent struct {
	gen     atomic.Uint64
	direct  atomic.Int32           // waiters asleep on the transport's doorbells
	intr    func()                 // interrupts those sleeps; set before use
	notify  atomic.Pointer[func()] // an outside waiter's wakeup (Stream.SetNotify); nil: none
	outside attendance             // outside waiters (Stream.Attend)
	mu      sync.Mutex
	ch      chan struct{} // nil while nobody waits; +checklocks:mu
}

func (e *streamEvent) signal() {
	e.gen.Add(1)
	if e.direct.Load() > 0 {
		e.intr()
	}
	if f := e.notify.Load(); f != nil {
		(*f)()
	}
	e.mu.Lock()
	if e.ch != nil {
		close(e.ch)
		e.ch = nil
	}
	e.mu.Unlock()
}

// wait returns nil once the generation differs from seen, or
// os.ErrDeadlineExceeded at the deadline (zero: none).
func (e *streamEvent) wait(seen uint64, deadline time.Time) error {
	e.mu.Lock()
	if e.gen.Load() != seen {
		e.mu.Unlock()
		return nil
	}
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	ch := e.ch
	e.mu.Unlock()
	if deadline.IsZero() {
		<-ch
		return nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		if e.gen.Load() != seen {
			return nil
		}
		return os.ErrDeadlineExceeded
	}
}
