package slidingwindow

import "sync/atomic"

// Stats are a transport's counters.
type Stats struct {
	BlocksSent, BlocksReceived uint64
	AcksSent, AcksReceived     uint64 // acknowledgement SENDs
	SendFull                   uint64 // TrySend calls that found no room after taking acknowledgements
	BlocksReleased             uint64 // received blocks released (BlocksReceived less these are in use)
}

type counters struct {
	sent, received, acksSent, acksReceived, full, released atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats {
	return Stats{
		BlocksSent: t.stats.sent.Load(), BlocksReceived: t.stats.received.Load(),
		AcksSent: t.stats.acksSent.Load(), AcksReceived: t.stats.acksReceived.Load(),
		SendFull: t.stats.full.Load(), BlocksReleased: t.stats.released.Load(),
	}
}
