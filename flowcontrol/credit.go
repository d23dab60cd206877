package flowcontrol

import "github.com/sdpshim/sdpshim/core/wire"

// credit is the credit-based scheme: the receiver's memory is counted in
// blocks, each block carries at most one write's bytes (a small write
// leaves the rest of its block empty, as in the paper), and the sender may
// have at most K blocks not yet credited back. The receiver returns the
// credits of consumed blocks in one ControlCredit record once half of K
// have been used (the paper's delayed acknowledgement).
type credit struct {
	base
	k int

	// Sending side. outstanding: blocks sent and not yet credited back;
	// NextSegment makes the stream wait while it is K or more.
	outstanding int

	// Receiving side.
	threshold  int    // consumed blocks that trigger a return: max(1, K/2)
	unreturned int    // blocks consumed since the last return
	arrived    uint64 // blocks arrived (Arrived)
	returned   uint64 // credits returned to the peer
}

var (
	_ wire.FlowController = (*credit)(nil)
	_ StatsSource         = (*credit)(nil)
)

func newCredit(p Params) *credit {
	return &credit{
		base:      base{name: NameCredit},
		k:         p.Credits,
		threshold: max(1, p.Credits/2),
	}
}

// NextSegment offers the rest of the oldest write, up to one block, while
// a credit is left.
func (c *credit) NextSegment(queued, msg, maxPayload int) int {
	n := 0
	if c.outstanding < c.k {
		n = min(msg, maxPayload)
	}
	return c.offer(queued, msg, maxPayload, n)
}

// Sent spends one credit per block with payload. It counts even past K (a
// stream bug), so the peer's returns still validate against what was spent.
func (c *credit) Sent(n int) {
	if n <= 0 {
		return
	}
	c.outstanding++
	c.countSent(n)
}

// Buffered is false: a write waits until all its bytes are in blocks.
func (c *credit) Buffered() bool { return false }

// AsyncFlush is false: nothing is held once Write returns.
func (c *credit) AsyncFlush() bool { return false }

// Open returns nothing: both ends start knowing the sender holds K credits.
func (c *credit) Open() []wire.ControlRecord { return nil }

// Consumed counts a consumed block and returns the credits of the blocks
// consumed so far once they reach half of K.
func (c *credit) Consumed(n int) (wire.ControlRecord, bool) {
	if n <= 0 {
		return wire.ControlRecord{}, false
	}
	c.countConsumed(n)
	c.unreturned++
	if c.unreturned < c.threshold {
		return wire.ControlRecord{}, false
	}
	rec := wire.ControlRecord{Kind: wire.ControlCredit, Value: uint32(c.unreturned)}
	c.returned += uint64(c.unreturned)
	c.unreturned = 0
	return c.emit(rec)
}

// OnControl takes back returned credits; returning none, or more than are
// outstanding, is a protocol violation.
func (c *credit) OnControl(rec wire.ControlRecord) error {
	if rec.Kind != wire.ControlCredit {
		return protocolError(c.name, "control record of kind %d, want credit (%d)", rec.Kind, wire.ControlCredit)
	}
	if rec.Value == 0 || uint64(rec.Value) > uint64(c.outstanding) {
		return protocolError(c.name, "%d credits returned, %d outstanding", rec.Value, c.outstanding)
	}
	c.outstanding -= int(rec.Value)
	c.granted()
	return nil
}

// Arrived rejects a block beyond the K credits the peer holds.
func (c *credit) Arrived(n int) error {
	if n <= 0 {
		return nil
	}
	if c.arrived+1-c.returned > uint64(c.k) {
		return protocolError(c.name, "block beyond the peer's %d credits", c.k)
	}
	c.arrived++
	return nil
}
