package mux

import (
	"errors"

	"github.com/sdpshim/sdpshim/core/wire"
)

// The scheduler (seed 003). Streams with something to send sit in the
// active list; each round the scheduler visits them in the order of the
// priority rule (sched.go) and gives each a turn: a reset, control
// records, one sub-write of data segments the flow controller sizes
// (ChannelConfig.SubWrite), or a bare FIN. A large write is so cut into
// sub-writes between which every other stream gets its turn. It stops
// when the transport is full or a round sends nothing. Whoever writes
// runs it for every stream (flat combining).

// sendResult is what one visit of a stream did.
type sendResult uint8

const (
	sendIdle   sendResult = iota // nothing sendable now
	sendDone                     // one block went
	sendFull                     // the transport has no room
	sendPaused                   // data held back: the stream holds too many blocks
)

// flush runs the scheduler and returns the blocks this call sent. When
// another goroutine is running it, flush asks that one to run again and
// returns 0.
func (c *Channel) flush() int {
	total := 0
	for !c.dead.Load() {
		if !c.sendMu.TryLock() {
			c.flushReq.Store(true)
			if !c.sendMu.TryLock() {
				return total
			}
		}
		c.flushReq.Store(false)
		n, err := c.flushLocked()
		c.sendMu.Unlock()
		total += n
		if err != nil {
			c.failSend(err)
			return total
		}
		if !c.flushReq.Load() {
			return total
		}
	}
	return total
}

// flushWait runs the scheduler itself, waiting for a running one to
// finish first: a nonblocking call's one attempt must really happen.
// Like flush, it runs again for a flush that found it running (flushReq):
// that caller returned 0 on its word, and may go to sleep on it.
func (c *Channel) flushWait() {
	if c.dead.Load() {
		return
	}
	c.sendMu.Lock()
	c.flushReq.Store(false) // this round covers what was asked so far
	_, err := c.flushLocked()
	c.sendMu.Unlock()
	if err != nil {
		c.failSend(err)
		return
	}
	if c.flushReq.Load() {
		c.flush()
	}
}

// failSend ends the channel after a send error. A peer that went away
// (its process exited after its last write) may have written its last
// blocks, data and FIN, before it went: they are taken first
// (drainAndFail), so a reader gets everything the peer sent before it
// exited, as over kernel TCP, instead of losing it because a credit
// return or window post failed first.
func (c *Channel) failSend(err error) {
	if errors.Is(err, wire.ErrPeerGone) {
		c.drainAndFail(err)
		return
	}
	c.fail(err)
}

// drainAndFail takes what arrived until the transport reports its end (in
// order, after the blocks already there) or nothing more comes, then
// fails the channel with whichever error came first.
func (c *Channel) drainAndFail(err error) {
	for i := 0; i < 1000 && !c.dead.Load(); i++ {
		c.recvMu.Lock()
		n, perr := c.pumpLocked()
		c.recvMu.Unlock()
		if perr != nil {
			c.fail(perr) // the receiving side's end, after its last block
			return
		}
		if n == 0 {
			break
		}
	}
	c.fail(err)
}

// flushLocked runs rounds until the transport is full or a round sends
// nothing; when only the block cap held data back it refreshes the
// transport's view once and tries again. Each round visits the streams in
// the order of the priority rule (sched.go) and gives each a turn: one
// sub-write of data (turnBlocks), or one block of something else.
//
// +checklocks:c.sendMu
func (c *Channel) flushLocked() (int, error) {
	sent, refreshed := 0, false
	for {
		c.actMu.Lock()
		c.snap = append(c.snap[:0], c.active...)
		c.actMu.Unlock()
		if len(c.snap) == 0 {
			c.prog.async.Store(false)
			return sent, nil
		}
		c.orderLocked(c.snap)
		progress, full, paused, async := false, false, false, false
		for _, s := range c.order {
			n, res, left, err := c.turnOf(s)
			if err != nil {
				return sent, err
			}
			async = async || left
			if n > 0 {
				progress = true
				sent += n
			}
			switch res {
			case sendDone: // a scheduling point with data left
				if c.waiting > 1 {
					s.sched.preemptions.Add(1)
				}
			case sendPaused:
				paused = true
			case sendFull:
				full = true
				c.resume = s // it goes on first next time
			}
			if full {
				async = true // unknown for the rest: let the progress goroutines look
				break
			}
		}
		if !full {
			c.rr++
		}
		if !progress && paused && !full && !refreshed && c.counter != nil {
			refreshed = true
			if err := c.counter.Refresh(); err != nil {
				return sent, err
			}
			continue
		}
		if full || !progress {
			c.setAsync(async)
			return sent, nil
		}
	}
}

// turnOf gives s one turn: its control blocks, then data blocks until its
// sub-write is out (c.turn data blocks, no limit when c.turn is 0) or
// nothing more can go. Data that is not small waits after control blocks
// for the next round, where it goes with the other large writes. n is the blocks sent; res is sendDone when the
// turn ended at the sub-write's end with data left (a scheduling point),
// else what stopped it.
//
// +checklocks:c.sendMu
func (c *Channel) turnOf(s *Stream) (n int, res sendResult, left bool, err error) {
	d := 0 // data blocks
	for {
		var data bool
		res, left, data, err = c.sendOne(s)
		if err != nil || res != sendDone {
			return n, res, left, err
		}
		n++
		if data {
			d++
		}
		if c.turn > 0 && (d >= c.turn || (!data && !c.small(s))) {
			s.mu.Lock()
			more := s.sendableLocked()
			s.mu.Unlock()
			if !more {
				return n, sendIdle, left, nil
			}
			return n, sendDone, left, nil
		}
	}
}

// setAsync records whether data waits for a flush the progress goroutines
// should make without the application.
func (c *Channel) setAsync(v bool) {
	if c.prog.async.Swap(v) != v && v {
		c.prog.kick(true)
	}
}

// sendOne sends at most one block of s. left reports that s still has
// something to send that needs no application call (async controller,
// or closed / shut down); data that the block was a data block.
//
// +checklocks:c.sendMu
func (c *Channel) sendOne(s *Stream) (res sendResult, left, data bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		s.deactivateLocked()
		return sendIdle, false, false, nil
	}
	hdr := wire.BlockHeader{Stream: s.id}
	var payload []byte
	var dataN int
	switch {
	case s.resetOut == finQueued:
		hdr.Flags, hdr.Seq = wire.FlagReset, s.txSeq
	case len(s.ctrlOut) > 0 || s.announce:
		k := min(len(s.ctrlOut), c.maxPay/wire.ControlRecordSize)
		c.ctrlWire = wire.AppendControl(c.ctrlWire[:0], s.ctrlOut[:k])
		payload = c.ctrlWire
		hdr.Flags, hdr.Seq = wire.FlagControl, s.txCtrl
	case s.sendableLocked():
		if !(s.calls > 0 || s.fc.AsyncFlush() || s.closed || s.wrShut) {
			return sendIdle, false, false, nil // waits for the application to call in
		}
		if c.pausedLocked(s) || c.reserveLocked() {
			return sendPaused, s.asyncLocked(), false, nil
		}
		_, pay := s.rcvLimitLocked(c.maxPay)
		dataN = min(s.fc.NextSegment(s.queued, len(s.sendq[0].b), pay), s.queued, pay)
		if dataN <= 0 {
			return sendIdle, s.asyncLocked(), false, nil // no credit or window yet
		}
		payload = c.segmentLocked(s, dataN)
		hdr.Flags, hdr.Seq = wire.FlagData, s.txSeq
		if s.finOut == finQueued && dataN == s.queued {
			hdr.Flags |= wire.FlagFIN
		}
	case s.finOut == finQueued && s.queued == 0 && !s.resetIn && s.resetOut == finNone:
		hdr.Flags, hdr.Seq = wire.FlagFIN, s.txSeq
	default:
		s.deactivateLocked()
		return sendIdle, false, false, nil
	}
	hdr.Len = uint32(len(payload))
	ok, err := c.t.TrySend(hdr, payload)
	if err != nil {
		return sendIdle, false, false, err
	}
	if !ok {
		return sendFull, s.asyncLocked(), false, nil
	}
	s.sentLocked(hdr, dataN)
	if !s.hasWorkLocked() {
		s.deactivateLocked()
	}
	return sendDone, s.hasWorkLocked() && s.asyncLocked(), dataN > 0, nil
}

// sentLocked updates s after a block with header h (dataN stream bytes)
// went.
//
// +checklocks:s.mu
func (s *Stream) sentLocked(h wire.BlockHeader, dataN int) {
	switch {
	case h.Flags == wire.FlagControl:
		k := int(h.Len) / wire.ControlRecordSize
		s.ctrlOut = s.ctrlOut[k:]
		if len(s.ctrlOut) == 0 {
			s.ctrlOut = nil
		}
		s.announce = false
		s.txCtrl++
		return
	case h.Flags == wire.FlagReset:
		s.resetOut = finSent
	case h.Flags&wire.FlagFIN != 0:
		s.finOut = finSent
	}
	s.txSeq++
	if dataN > 0 {
		s.fc.Sent(dataN)
		s.consumeLocked(dataN)
	}
	if h.Flags&(wire.FlagFIN|wire.FlagReset) != 0 {
		s.maybeDeleteLocked()
	}
	s.ev.signal()
}

// sendableLocked reports whether s has data the scheduler may send.
//
// +checklocks:s.mu
func (s *Stream) sendableLocked() bool {
	return s.queued > 0 && !s.resetIn && s.resetOut == finNone
}

// hasWorkLocked reports whether s has anything left to send.
//
// +checklocks:s.mu
func (s *Stream) hasWorkLocked() bool {
	return s.err == nil && (s.resetOut == finQueued || len(s.ctrlOut) > 0 || s.announce ||
		s.sendableLocked() || (s.finOut == finQueued && !s.resetIn && s.resetOut == finNone))
}

// asyncLocked reports whether s's pending work may be flushed without an
// application call.
//
// +checklocks:s.mu
func (s *Stream) asyncLocked() bool {
	return s.resetOut == finQueued || len(s.ctrlOut) > 0 || s.announce || s.fc.AsyncFlush() || s.closed || s.wrShut
}

// pausedLocked reports whether s's data must wait: the peer retains a
// block of it, or it holds the channel's cap of blocks, its fair share
// while others wait (shareLocked) or what its receive buffer allows
// (stream_buffers.go).
//
// +checklocks:c.sendMu
// +checklocks:s.mu
func (c *Channel) pausedLocked(s *Stream) bool {
	if c.counter != nil {
		n, retained := c.counter.Held(s.id)
		limit, _ := s.rcvLimitLocked(c.maxPay)
		return retained || (c.heldCap > 0 && n >= c.heldCap) || (limit > 0 && n >= limit) || c.shareLocked(s, n)
	}
	return c.ret != nil && c.ret.Retained(s.id)
}

// reserveLocked reports whether data must leave the receiver's last free
// block (in the sender's view) to control, FIN and reset blocks. The
// per-stream cap (heldCap) keeps one unread stream from taking every
// block, but several can: their data would then hold every block of this
// direction while a credit return or window post that a writer on the
// other side waits for, maybe the one whose data would let a reader here
// go on, finds none (a deadlock across the two directions). Only
// BlockCounter transports of two blocks or more keep the reserve.
//
// +checklocks:c.sendMu
func (c *Channel) reserveLocked() bool {
	return c.reserve && c.counter.Free() <= 1
}

// segmentLocked returns the next n queued bytes of s, from the first
// chunk or gathered from several.
//
// +checklocks:c.sendMu
func (c *Channel) segmentLocked(s *Stream, n int) []byte {
	if first := s.sendq[0].b; n <= len(first) {
		return first[:n]
	}
	c.gather = c.gather[:0]
	for _, ch := range s.sendq {
		k := min(n-len(c.gather), len(ch.b))
		c.gather = append(c.gather, ch.b[:k]...)
		if len(c.gather) == n {
			break
		}
	}
	return c.gather
}

// consumeLocked drops n sent bytes from the head of the queue.
//
// +checklocks:s.mu
func (s *Stream) consumeLocked(n int) {
	s.queued -= n
	for n > 0 {
		ch := s.sendq[0]
		k := min(n, len(ch.b))
		ch.b = ch.b[k:]
		if ch.owned {
			s.owned -= k
		}
		n -= k
		if len(ch.b) == 0 {
			s.sendq[0] = nil
			s.sendq = s.sendq[1:]
		}
	}
	if len(s.sendq) == 0 {
		s.sendq = s.sendqBuf[:0]
	}
}

// deactivateLocked takes s out of the active list.
//
// +checklocks:s.mu
func (s *Stream) deactivateLocked() {
	if !s.active {
		return
	}
	s.active = false
	c := s.c
	c.actMu.Lock()
	for i, x := range c.active {
		if x == s {
			c.active = append(c.active[:i], c.active[i+1:]...)
			break
		}
	}
	c.actMu.Unlock()
}
