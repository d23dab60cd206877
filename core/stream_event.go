package core

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
	gen atomic.Uint64
	mu  sync.Mutex
	ch  chan struct{} // nil while nobody waits; +checklocks:mu
}

func (e *streamEvent) signal() {
	e.gen.Add(1)
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

// localBell is the Doorbell a goroutine waiting on the channel sleeps on:
// its stream's event, plus the channel's count of sleepers, which sends
// the progress goroutines to sleep on the transport's doorbells for it.
type localBell struct {
	c      *Channel
	ev     *streamEvent
	writer bool // a writer: it may wait for transport space
	seen   uint64
	armed  bool
}

func (c *Channel) localBell(ev *streamEvent, writer bool) *localBell {
	return &localBell{c: c, ev: ev, writer: writer}
}

func (b *localBell) Arm() error {
	b.seen = b.ev.gen.Load()
	if !b.armed {
		b.armed = true
		b.c.prog.sleepers.Add(1)
		if b.writer {
			b.c.prog.writers.Add(1)
		}
		b.c.prog.kick(b.writer)
	}
	return nil
}

func (b *localBell) Sleep(deadline time.Time) error {
	err := b.ev.wait(b.seen, deadline)
	b.Disarm()
	return err
}

func (b *localBell) Disarm() {
	if b.armed {
		b.armed = false
		b.c.prog.sleepers.Add(-1)
		if b.writer {
			b.c.prog.writers.Add(-1)
		}
	}
}
