package mux

import (
	"os"
	"time"
)

// localBell is the Doorbell a goroutine waiting on the channel (a Read, a
// Write, an Accept) sleeps on; it wakes when its stream event moves.
//
// On a BellPair transport the waiter sleeps on the transport's doorbells
// itself (direct): no progress goroutine stands between the peer's ring
// and the waiter, which saves a wakeup per sleep. After arming the
// transport it pumps (and, for a writer, flushes) once more, so a block
// that landed before the arm is not missed; when its event moves because
// another goroutine pumped, the event's signal interrupts the transport
// sleep. On other transports the waiter sleeps on its event alone and the
// progress goroutines sleep on the transport for it.
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

// interrupt ends the direct sleeps on the transport (BellPair only).
func (c *Channel) interrupt() {
	if c.prog.pair != nil {
		c.prog.pair.Interrupt()
	}
}

func (b *localBell) Arm() error {
	b.seen = b.ev.gen.Load()
	if !b.armed && b.c.prog.pair == nil {
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
	if b.c.prog.pair != nil {
		return b.sleepDirect(deadline)
	}
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

// sleepDirect sleeps on the transport's doorbells until a ring, the
// event, the deadline or the end. A transport error ends the channel
// (after the blocks already arrived) and wakes the caller with nil: it
// finds the channel's error in its stream.
func (b *localBell) sleepDirect(deadline time.Time) error {
	c := b.c
	if c.dead.Load() {
		return nil
	}
	b.ev.direct.Add(1)
	defer b.ev.direct.Add(-1)
	h := c.prog.pair.Bells(true, b.writer)
	err := h.Arm()
	if err == nil {
		c.pump()
		if b.writer {
			c.flush()
		}
		if b.ev.gen.Load() != b.seen {
			h.Disarm()
			return nil
		}
		err = h.Sleep(deadline)
	}
	if err == nil || err == os.ErrDeadlineExceeded {
		return err
	}
	c.prog.end(err)
	return nil
}
