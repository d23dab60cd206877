package flowcontrol

import (
	"sync/atomic"

	"github.com/sdpshim/sdpshim/core/wire"
)

// base is the accounting every controller shares. The counters are atomics
// for Stats; the other fields, like the rest of a controller, are guarded
// by the stream's lock.
type base struct {
	name string
	// asyncFlush is the algorithm's AsyncFlush answer, for AsyncFlushes.
	asyncFlush bool

	// The sender's pending offer: what NextSegment returned a block for and
	// the arguments it was given, until Sent (CoalescedBytes, CapacitySent).
	offered  bool
	offerMsg int
	lastMax  int
	// stalled: the last NextSegment made the stream wait with bytes queued.
	stalled bool

	blocksSent, bytesSent, capacitySent  atomic.Uint64
	stalls, coalescedBytes, asyncFlushes atomic.Uint64
	controlReceived                      atomic.Uint64
	blocksConsumed, bytesConsumed        atomic.Uint64
	controlSent                          atomic.Uint64
}

func (b *base) Name() string { return b.name }

// Stats implements StatsSource.
func (b *base) Stats() Stats {
	bytesSent := b.bytesSent.Load() // before capacity: see countSent
	return Stats{
		BlocksSent:      b.blocksSent.Load(),
		BytesSent:       bytesSent,
		CapacitySent:    b.capacitySent.Load(),
		Stalls:          b.stalls.Load(),
		CoalescedBytes:  b.coalescedBytes.Load(),
		AsyncFlushes:    b.asyncFlushes.Load(),
		ControlReceived: b.controlReceived.Load(),
		BlocksConsumed:  b.blocksConsumed.Load(),
		BytesConsumed:   b.bytesConsumed.Load(),
		ControlSent:     b.controlSent.Load(),
	}
}

// offer records NextSegment's answer n for (queued, msg, max) and returns
// it, clamped to [0, min(queued, max)] so no algorithm can offer bytes the
// stream does not have or a block cannot carry.
func (b *base) offer(queued, msg, maxPayload, n int) int {
	n = max(0, min(n, queued, maxPayload))
	b.lastMax = maxPayload
	b.offered, b.offerMsg = n > 0, msg
	switch {
	case n > 0:
		b.stalled = false
	case queued > 0 && !b.stalled:
		b.stalled = true
		b.stalls.Add(1)
	}
	return n
}

// countSent accounts a written block of n > 0 payload bytes.
func (b *base) countSent(n int) {
	// Capacity before bytes, and Stats loads bytes before capacity, so a
	// snapshot never shows more bytes than room (utilisation <= 1).
	b.capacitySent.Add(uint64(max(n, b.lastMax)))
	b.bytesSent.Add(uint64(n))
	b.blocksSent.Add(1)
	if b.offered && n > b.offerMsg {
		b.coalescedBytes.Add(uint64(n - b.offerMsg))
	}
	b.offered = false
}

// countConsumed accounts a consumed block of n > 0 payload bytes.
func (b *base) countConsumed(n int) {
	b.blocksConsumed.Add(1)
	b.bytesConsumed.Add(uint64(n))
}

// emit accounts a record returned to the stream for the peer.
func (b *base) emit(rec wire.ControlRecord) (wire.ControlRecord, bool) {
	b.controlSent.Add(1)
	return rec, true
}

// granted accounts an accepted record that gave the sender room (credits,
// window): it ends a stall, which on an AsyncFlush controller the progress
// goroutine now flushes.
func (b *base) granted() {
	b.controlReceived.Add(1)
	if b.stalled {
		b.stalled = false
		if b.asyncFlush {
			b.asyncFlushes.Add(1)
		}
	}
}
