package flowcontrol

import "github.com/sdpshim/sdpshim/core/wire"

// nicAssist is the paper's NIC-assisted scheme: packed, plus receive
// requests that each guarantee a virtual window of W bytes. The receiving
// end posts as many windows as its memory holds when the stream opens and
// one more for every W bytes the reader consumes; the sender segments to
// the window it was posted and waits when none is left. Held bytes are
// flushed by the stream's progress goroutine as soon as a post arrives
// (AsyncFlush), while the application computes (the NIC completion that
// wakes the software-handled part of the send buffer).
//
// A ControlWindow record's Value is a whole number of windows (k*W bytes),
// so one record can post several: Open's initial posts, or a block that
// carried more than W bytes.
type nicAssist struct {
	base
	w        uint64 // W
	capacity uint64 // the receiving end's memory: posts never exceed it

	// Sending side: window bytes the peer posted, and bytes sent.
	posted, sentBytes uint64

	// Receiving side.
	postedOut uint64 // window bytes this end posted
	arrived   uint64 // bytes arrived (Arrived)
	unposted  uint64 // bytes consumed since the last post, < W between calls
}

var (
	_ wire.FlowController = (*nicAssist)(nil)
	_ StatsSource         = (*nicAssist)(nil)
)

func newNICAssist(p Params) *nicAssist {
	return &nicAssist{
		base:     base{name: NameNICAssist, asyncFlush: true},
		w:        uint64(p.VirtualWindow),
		capacity: uint64(p.ReceiveCapacity),
	}
}

// window returns the posted bytes not yet sent.
func (a *nicAssist) window() uint64 {
	if a.posted <= a.sentBytes {
		return 0
	}
	return a.posted - a.sentBytes
}

// NextSegment packs like packed, but no further than the posted window.
func (a *nicAssist) NextSegment(queued, msg, maxPayload int) int {
	n := min(queued, maxPayload)
	if uint64(max(n, 0)) > a.window() {
		n = int(a.window())
	}
	return a.offer(queued, msg, maxPayload, n)
}

// Sent spends n bytes of window.
func (a *nicAssist) Sent(n int) {
	if n <= 0 {
		return
	}
	a.sentBytes += uint64(n)
	a.countSent(n)
}

// Buffered is true: Write returns once its bytes are queued.
func (a *nicAssist) Buffered() bool { return true }

// AsyncFlush is true: a window post wakes the progress goroutine.
func (a *nicAssist) AsyncFlush() bool { return true }

// Open posts the windows that fit the receiving memory, as one record of
// floor(capacity/W)*W bytes (at least one window: New checks W <= capacity).
// Call it once per stream.
func (a *nicAssist) Open() []wire.ControlRecord {
	v := a.capacity / a.w * a.w
	a.postedOut += v
	rec, _ := a.emit(wire.ControlRecord{Kind: wire.ControlWindow, Value: uint32(v)})
	return []wire.ControlRecord{rec}
}

// Consumed posts a window for every W bytes the reader consumed.
func (a *nicAssist) Consumed(n int) (wire.ControlRecord, bool) {
	if n <= 0 {
		return wire.ControlRecord{}, false
	}
	a.countConsumed(n)
	a.unposted += uint64(n)
	if a.unposted < a.w {
		return wire.ControlRecord{}, false
	}
	v := a.unposted / a.w * a.w
	if v > a.capacity { // more consumed than ever posted: cap the post
		v = a.capacity / a.w * a.w
	}
	a.unposted -= v
	a.postedOut += v
	return a.emit(wire.ControlRecord{Kind: wire.ControlWindow, Value: uint32(v)})
}

// OnControl takes a window post: a whole number of windows that, with the
// window not yet used, fits the receiving memory.
func (a *nicAssist) OnControl(rec wire.ControlRecord) error {
	if rec.Kind != wire.ControlWindow {
		return protocolError(a.name, "control record of kind %d, want window (%d)", rec.Kind, wire.ControlWindow)
	}
	v := uint64(rec.Value)
	if v == 0 || v%a.w != 0 {
		return protocolError(a.name, "window post of %d bytes, want a multiple of %d", v, a.w)
	}
	if open := a.window() + v; open > a.capacity {
		return protocolError(a.name, "window post of %d bytes opens %d, beyond the receive capacity %d", v, open, a.capacity)
	}
	a.posted += v
	a.granted()
	return nil
}

// Arrived rejects bytes beyond the windows this end posted.
func (a *nicAssist) Arrived(n int) error {
	if n <= 0 {
		return nil
	}
	if a.arrived+uint64(n) > a.postedOut {
		return protocolError(a.name, "%d bytes arrived beyond the %d posted", a.arrived+uint64(n)-a.postedOut, a.postedOut)
	}
	a.arrived += uint64(n)
	return nil
}
