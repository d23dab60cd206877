package core

// ControlKind says what a control record means.
type ControlKind uint8

const (
	// ControlCredit returns Value credits (blocks) to the sender.
	ControlCredit ControlKind = iota + 1
	// ControlWindow posts a virtual window of Value bytes to the sender.
	ControlWindow
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
// One controller serves one stream end, both directions; the stream calls
// it under the stream's lock, so it needs no locking of its own.
type FlowController interface {
	// Name returns the algorithm's name ("credit", "packed", "nicassist").
	Name() string

	// NextSegment returns how many bytes from the head of the send queue
	// go into the next block: queued is the number of bytes queued, msg
	// the bytes up to the end of the oldest write not yet fully sent
	// (msg <= queued), max the transport's MaxPayload. 0 means the stream
	// must wait for a control record (no credit, no window).
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
