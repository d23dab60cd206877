package wire

// ControlKind says what a control record means.
type ControlKind uint8

const (
	// ControlCredit returns Value credits (blocks) to the sender.
	ControlCredit ControlKind = iota + 1
	// ControlWindow posts Value bytes of virtual window to the sender.
	// Value is always a whole number of windows: k*W bytes with k >= 1,
	// W the algorithm's virtual window (one record may post several).
	ControlWindow
	// ControlRcvBuf is the receiving side's receive buffer (SO_RCVBUF, the
	// kernel's effective value) in bytes: the sender keeps at most that
	// many of the stream's bytes unread at the receiver, rounded up to
	// whole blocks; 0 lifts the limit. The stream handles it, not the flow
	// controller.
	ControlRcvBuf
)

// ControlRecord is a flow-control message from a stream's receiving side
// to its sending side, carried in a FlagControl block.
type ControlRecord struct {
	Kind  ControlKind
	Value uint32
}

// FlowController is one stream's flow control (seed 001): it decides how
// the stream's queued bytes map to blocks, when they may go, what the
// receiving side tells the sender, and who makes progress on held data.
// Implementations live in package flowcontrol (credit, packed, nicassist).
//
// One controller serves one stream end, both directions: its sending half
// (NextSegment, Sent, OnControl) and its receiving half (Open, Arrived,
// Consumed) share nothing but the object. The stream calls every method
// under the stream's lock, so it needs no locking of its own.
//
// The rules the stream follows, which every controller may rely on:
//
//   - Open is called exactly once per stream end, before any other method
//     of its receiving half: when this side opens the stream, or when the
//     peer's first block of it arrives. Its records go out before any
//     record Consumed returns.
//   - Arrived is called once per data block with payload, when the block
//     arrives (in any order relative to other blocks of the stream),
//     before Consumed for it; blocks without payload (a bare FIN, a
//     reset) and control blocks are not counted.
//   - Consumed is called once per data block with payload when the reader
//     has read all of its bytes (not for a Peek), in stream order. Blocks
//     the stream drops (the stream was closed or reset with unread data)
//     are never Consumed: their credits or windows are not returned, as
//     the stream is ending.
//   - FIN: the last block of a direction may carry payload (FlagData|
//     FlagFIN); it is flow-controlled like any data block (NextSegment,
//     Sent, Arrived, Consumed). A bare FIN (no payload) and a reset are
//     not: they go even when NextSegment would return 0, so a stream can
//     always end.
//   - Control records are never held behind data: the receiving side
//     applies them (OnControl) when they arrive, whatever unread data the
//     stream has, and on a BlockCounter transport a stream never holds
//     every block, so its peer's records find one (ChannelConfig.MaxHeld).
//
// Both ends of a stream must build their controllers from the same
// parameters (algorithm, credits K, virtual window W, block payload and
// receive capacity): each end checks the other's records and blocks
// against its own. The shim makes a mismatch fail at channel setup
// (ErrMismatch), before any block: the flow-control name it compares
// there names the parameters too (flowcontrol.Signature). A mismatch that
// slipped through shows as a protocol error (ErrProtocol) from OnControl
// or Arrived, which ends the channel.
type FlowController interface {
	// Name returns the algorithm's name ("credit", "packed", "nicassist").
	Name() string
	// NextSegment returns how many bytes from the head of the send queue
	// go into the next block: queued is the number of bytes queued, msg
	// the bytes up to the end of the oldest write not yet fully sent
	// (msg <= queued), max the transport's MaxPayload. 0 means the stream
	// must wait for a control record (no credit, no window). A non-zero
	// answer is an offer: the block may still not go (the transport is
	// full), in which case NextSegment is asked again later without Sent.
	NextSegment(queued, msg, max int) int
	// Sent records that a block with n payload bytes was written.
	Sent(n int)
	// Buffered reports whether Write may return after queueing bytes in
	// software that could not be placed in blocks yet (packed, nicassist:
	// coalescing), up to the send buffer size. When false, Write waits
	// until all its bytes are in blocks (credit).
	Buffered() bool
	// AsyncFlush reports whether held bytes are flushed by the progress
	// goroutine as soon as a control record or freed space allows
	// (nicassist), rather than only when the application next calls in
	// (packed: the paper's progress problem).
	AsyncFlush() bool
	// Open returns the control records the receiving side sends when the
	// stream opens (nicassist's initial window posts); may be empty.
	Open() []ControlRecord
	// Arrived records, on the receiving side, that a data block with n > 0
	// payload bytes arrived. It returns an error wrapping ErrProtocol when
	// the peer sent beyond the credits or windows this end gave it (a
	// hostile or mismatched peer); the channel then ends.
	Arrived(n int) error
	// Consumed records, on the receiving side, that the reader consumed a
	// whole block carrying n payload bytes, and returns a control record
	// to send to the peer now, if any (credit: returned credits once half
	// are used; nicassist: a new window post).
	Consumed(n int) (rec ControlRecord, ok bool)
	// OnControl applies a control record from the peer. It returns an
	// error (wrapping ErrProtocol) for a record this algorithm does not
	// use or whose value would overflow its accounting: a hostile peer.
	OnControl(rec ControlRecord) error
}
