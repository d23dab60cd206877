package slidingwindow

import "sync/atomic"

// Stats are a transport's counters.
type Stats struct {
	BlocksSent, BlocksReceived uint64
	AcksSent, AcksReceived     uint64 // acknowledgement SENDs
	SendFull                   uint64 // TrySend calls that found no room after taking acknowledgements
}

type counters struct {
	sent, received, acksSent, acksReceived, full atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats {
	return Stats{
		BlocksSent: t.stats.sent.Load(), BlocksReceived: t.stats.received.Load(),
		AcksSent: t.stats.acksSent.Load(), AcksReceived: t.stats.acksReceived.Load(),
		SendFull: t.stats.full.Load(),
	}
}
