package mux

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/wire"
)

// pumpBatch bounds the blocks one pump moves, so a reader that pumps for
// everyone returns to its own data soon.
const pumpBatch = 64

// pump moves arrived blocks to their streams and returns how many this
// call moved. One goroutine pumps at a time: a caller that finds another
// pumping asks it to look once more after it finishes (so a caller's
// check never misses a block that landed meanwhile) and returns 0. An
// invalid block ends the channel.
func (c *Channel) pump() int {
	total := 0
	for !c.dead.Load() {
		if !c.recvMu.TryLock() {
			c.pumpAgain.Store(true)
			if !c.recvMu.TryLock() {
				return total
			}
		}
		c.pumpAgain.Store(false)
		n, err := c.pumpLocked()
		c.recvMu.Unlock()
		total += n
		if err != nil {
			c.fail(err)
			return total
		}
		if c.pumpReq.Swap(false) {
			c.flush()
		}
		if !c.pumpAgain.Load() || n == pumpBatch {
			return total
		}
	}
	return total
}

// pumpWait pumps once itself, waiting for a running pump to finish
// first: a nonblocking call's one attempt must really happen. Like pump,
// it looks once more for a pump that found it running (pumpAgain): that
// caller returned 0 on its word, and may go to sleep on it.
func (c *Channel) pumpWait() {
	if c.dead.Load() {
		return
	}
	c.recvMu.Lock()
	c.pumpAgain.Store(false) // this pump covers what was asked so far
	_, err := c.pumpLocked()
	c.recvMu.Unlock()
	if err != nil {
		c.fail(err)
		return
	}
	if c.pumpReq.Swap(false) {
		c.flush()
	}
	if c.pumpAgain.Load() {
		c.pump()
	}
}

// pumpLocked moves up to pumpBatch blocks.
//
// +checklocks:c.recvMu
func (c *Channel) pumpLocked() (int, error) {
	n := 0
	for n < pumpBatch {
		b, ok, err := c.t.Receive()
		if err != nil || !ok {
			return n, err
		}
		n++
		if err := c.dispatch(b); err != nil {
			return n, err
		}
	}
	return n, nil
}

// dispatch hands one block to its stream, creating the stream when the
// peer opened it, dropping it when the stream is gone.
//
// +checklocks:c.recvMu
func (c *Channel) dispatch(b wire.Block) error {
	c.mu.Lock()
	s := c.streams[b.Stream]
	isNew := false
	if s == nil && c.err == nil {
		cls, err := c.ids.classify(b.Stream)
		if err != nil {
			c.mu.Unlock()
			c.release(b)
			return err
		}
		if cls == idNew {
			if c.cfg.MaxStreams > 0 && c.opened >= c.cfg.MaxStreams {
				c.mu.Unlock()
				c.release(b)
				return fmt.Errorf("peer opened stream %d beyond the channel's %d: %w", b.Stream, c.cfg.MaxStreams, wire.ErrProtocol)
			}
			s = newStream(c, b.Stream)
			c.streams[b.Stream] = s
			c.opened++
			isNew = true
		}
	}
	c.mu.Unlock()
	if s == nil {
		c.release(b)
		return nil
	}
	s.mu.Lock()
	if isNew {
		c.admitLocked(s)
	}
	err := s.deliverLocked(b)
	s.mu.Unlock()
	return err
}

// admitLocked queues a stream the peer opened for Accept, or refuses it
// (reset) when the backlog is full; it queues the stream's own opening
// records.
//
// +checklocks:s.mu
func (c *Channel) admitLocked(s *Stream) {
	s.ctrlOut = append(s.ctrlOut, s.fc.Open()...)
	c.mu.Lock()
	refuse := len(c.acceptq) >= c.cfg.Backlog
	if !refuse {
		c.acceptq = append(c.acceptq, s)
	}
	c.mu.Unlock()
	if refuse {
		s.closed = true
		c.prog.linger.Add(1)
		s.resetOut = finQueued
	}
	if refuse || len(s.ctrlOut) > 0 {
		s.activateLocked()
		c.pumpReq.Store(true)
	}
	c.acceptEv.signal()
}

// release gives a block back to the transport unless it was copied out
// of it (Index < 0).
func (c *Channel) release(b wire.Block) {
	if b.Index >= 0 {
		c.t.Release(b)
	}
}
