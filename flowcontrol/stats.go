package flowcontrol

// Stats is a snapshot of one controller's accounting; every algorithm keeps
// the same fields (a field an algorithm cannot produce stays 0). Each field
// is read atomically, but fields may come from slightly different instants.
type Stats struct {
	// Sending side.
	BlocksSent uint64 // blocks with payload written (Sent)
	BytesSent  uint64 // payload bytes in them
	// CapacitySent is the payload room of those blocks (the max offered to
	// NextSegment); BytesSent/CapacitySent is the buffer utilisation.
	CapacitySent uint64
	// Stalls counts the times the stream had bytes queued and the controller
	// made it wait (no credit, no window); a wait counts once however often
	// NextSegment is asked during it.
	Stalls uint64
	// CoalescedBytes counts payload bytes sent in a block behind bytes of an
	// earlier write: for a block of n bytes offered when the oldest write had
	// msg bytes left, max(0, n-msg). A write queues behind an earlier one
	// only when the earlier could not go out (a full channel, no window), so
	// these are the bytes that were held and went out together later.
	CoalescedBytes uint64
	// AsyncFlushes counts the stalls ended by a control record on a
	// controller whose held bytes the progress goroutine flushes
	// (AsyncFlush true), i.e. flushes made without the application.
	AsyncFlushes uint64
	// ControlReceived counts control records accepted from the peer.
	ControlReceived uint64

	// Receiving side.
	BlocksConsumed uint64 // blocks with payload the reader consumed
	BytesConsumed  uint64 // payload bytes in them
	ControlSent    uint64 // control records returned by Open and Consumed
}

// Utilisation returns BytesSent/CapacitySent: how full the blocks this end
// sent were (credit with small writes is low; packed is near 1). It returns
// 0 before any block was sent.
func (s Stats) Utilisation() float64 {
	if s.CapacitySent == 0 {
		return 0
	}
	return float64(s.BytesSent) / float64(s.CapacitySent)
}

// Add adds o's counts to s (totals over streams).
func (s *Stats) Add(o Stats) {
	s.BlocksSent += o.BlocksSent
	s.BytesSent += o.BytesSent
	s.CapacitySent += o.CapacitySent
	s.Stalls += o.Stalls
	s.CoalescedBytes += o.CoalescedBytes
	s.AsyncFlushes += o.AsyncFlushes
	s.ControlReceived += o.ControlReceived
	s.BlocksConsumed += o.BlocksConsumed
	s.BytesConsumed += o.BytesConsumed
	s.ControlSent += o.ControlSent
}

// StatsSource is implemented by every controller in this package. Stats is
// safe to call from any goroutine at any time, without the stream's lock.
type StatsSource interface {
	Stats() Stats
}
