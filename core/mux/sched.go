package mux

import "sync/atomic"

// Preemption (seed 003, PeRF, applied to the streams of a channel).
//
// Message-level: a stream's data goes out in sub-writes of turnBlocks
// blocks (ChannelConfig.SubWrite); after each sub-write of a stream that
// still has data queued the scheduler turns to the other streams, a
// scheduling point. The priority rule at each scheduling point: a round
// visits the urgent streams first, those whose next block is a reset or
// control records or whose queued data fits in one sub-write (a small
// message, or the tail of a large one), then the others; within each
// class it goes round-robin. So a 16-byte message waits for at most the
// sub-write in progress, never for a large write's remaining blocks.
//
// Stream-level: while more than one stream has data waiting, a stream
// that holds its fair share of the receiver's blocks (the blocks over
// the streams waiting, at least one) is paused until the receiver frees
// some, so a stream that is read slowly, or a connection set of many
// streams, cannot take every block from the others.
//
// Both are work-conserving: with one stream waiting there are no
// scheduling points (its turns follow each other at once) and no share,
// only the channel's cap (ChannelConfig.MaxHeld). With SubWrite negative
// both are off: a stream keeps its turn until its queued data is out or
// the transport or the cap stops it.

// SchedStats are one stream's scheduling counts.
type SchedStats struct {
	// Preemptions counts scheduling points at which the stream, with data
	// still queued, let other streams send first.
	Preemptions uint64
	// Pauses counts the times the stream was held back for its share of
	// the receiver's blocks.
	Pauses uint64
}

// schedCounts are a stream's SchedStats, updated by the scheduler and read
// by anyone.
type schedCounts struct {
	preemptions, pauses atomic.Uint64
}

// SchedStats returns the stream's scheduling counts so far.
func (s *Stream) SchedStats() SchedStats {
	return SchedStats{Preemptions: s.sched.preemptions.Load(), Pauses: s.sched.pauses.Load()}
}

// turnBlocks returns how many data blocks one stream sends per turn for a
// sub-write of sub bytes over blocks of maxPay payload bytes: at least
// one; 0 (no limit) when sub is negative.
func turnBlocks(sub, maxPay int) int {
	switch {
	case sub < 0:
		return 0
	case sub == 0 || maxPay <= 0:
		return 1
	}
	return max(1, (sub+maxPay-1)/maxPay)
}

// urgentLocked reports whether s belongs to the first class of a round
// (the priority rule above).
//
// +checklocks:s.mu
func (c *Channel) urgentLocked(s *Stream) bool {
	if s.resetOut == finQueued || len(s.ctrlOut) > 0 || s.announce {
		return true
	}
	return c.smallLocked(s)
}

// small is smallLocked for a caller without s.mu.
func (c *Channel) small(s *Stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.smallLocked(s)
}

// smallLocked reports whether s's queued data fits in one sub-write.
//
// +checklocks:s.mu
func (c *Channel) smallLocked(s *Stream) bool {
	return c.turn > 0 && s.queued <= c.turn*c.maxPay
}

// orderLocked fills c.order with the streams of list, the urgent ones
// first, each class rotated by the round-robin position or starting with
// the stream whose turn a full transport cut short, and counts the
// streams with data waiting (c.waiting, for the share).
//
// +checklocks:c.sendMu
func (c *Channel) orderLocked(list []*Stream) {
	c.order, c.rest = c.order[:0], c.rest[:0]
	c.waiting = 0
	start := c.rr % len(list)
	for i, s := range list {
		if s == c.resume {
			start = i // its turn was cut short by a full transport
		}
	}
	c.resume = nil
	for k := range list {
		s := list[(start+k)%len(list)]
		s.mu.Lock()
		urgent := c.urgentLocked(s)
		if s.sendableLocked() {
			c.waiting++
		}
		s.mu.Unlock()
		if urgent {
			c.order = append(c.order, s)
		} else {
			c.rest = append(c.rest, s)
		}
	}
	c.order = append(c.order, c.rest...)
}

// shareLocked reports whether s, holding held blocks of the receiver,
// must wait for its share (stream-level preemption), and counts a pause
// when it starts. held is the transport's view, which learns of freed
// blocks only when it reads the receiver's status: a stream of small
// messages that the receiver reads as they come (a ping-pong beside a
// bulk stream) would look like it holds every block it sent since, and
// pause for its share behind the bulk stream. So a count over the share
// is read again from a refreshed view before it pauses anything.
//
// +checklocks:s.mu
func (c *Channel) shareLocked(s *Stream, held int) bool {
	over := false
	if c.turn > 0 && c.waiting > 1 {
		share := max(1, c.counter.Blocks()/c.waiting)
		if over = held >= share; over {
			if n, err := c.heldRefreshed(s); err == nil {
				over = n >= share
			}
		}
	}
	if over && !s.sharePaused {
		s.sched.pauses.Add(1)
	}
	s.sharePaused = over
	return over
}
