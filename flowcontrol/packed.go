package flowcontrol

import "github.com/sdpshim/sdpshim/core/wire"

// packed is the paper's RDMA-based scheme: consecutive writes are packed
// into blocks, so small writes share the receiver's memory. The receiver's
// free space is what the transport learns with its status READ, so the
// controller never makes the stream wait; when the channel is full the
// stream keeps later writes in its send buffer (Buffered) and sends them
// together once space frees, but only when the application next calls in
// (AsyncFlush false: the paper's progress problem, kept on purpose).
type packed struct {
	base
}

var (
	_ wire.FlowController = (*packed)(nil)
	_ StatsSource         = (*packed)(nil)
)

func newPacked(Params) *packed {
	return &packed{base: base{name: NamePacked}}
}

// NextSegment fills a block from the queue, across write boundaries; it
// returns 0 only when nothing is queued.
func (p *packed) NextSegment(queued, msg, maxPayload int) int {
	return p.offer(queued, msg, maxPayload, min(queued, maxPayload))
}

// Sent accounts a written block.
func (p *packed) Sent(n int) {
	if n > 0 {
		p.countSent(n)
	}
}

// Buffered is true: Write returns once its bytes are queued (coalescing).
func (p *packed) Buffered() bool { return true }

// AsyncFlush is false: held bytes move only when the application calls in.
func (p *packed) AsyncFlush() bool { return false }

// Open returns nothing: packed sends no control records.
func (p *packed) Open() []wire.ControlRecord { return nil }

// Consumed accounts a consumed block; the freed space is the transport's
// business (its status byte), so no record is returned.
func (p *packed) Consumed(n int) (wire.ControlRecord, bool) {
	if n > 0 {
		p.countConsumed(n)
	}
	return wire.ControlRecord{}, false
}

// OnControl rejects every record: packed uses none.
func (p *packed) OnControl(rec wire.ControlRecord) error {
	return protocolError(p.name, "control record of kind %d, packed uses none", rec.Kind)
}

// Arrived accepts every block: the channel's status bytes bound the sender.
func (p *packed) Arrived(int) error { return nil }
