package wire

// BlockCounter is implemented by transports whose sending side knows
// which stream holds each of the receiver's blocks (the status-byte
// channel). The channel uses it to cap the blocks one stream may hold, so
// that a stream whose reader stopped cannot take every block, and to keep
// the last free block for control blocks, so that streams whose readers
// stopped cannot together hold back a credit return or a window post.
type BlockCounter interface {
	// Blocks returns the number of blocks the receiver has.
	Blocks() int
	// Held returns how many blocks of stream the receiver had not released
	// at the last view refresh (or that were written since), and whether
	// it retained one of them (as Retainer.Retained), in one call.
	Held(stream uint32) (blocks int, retained bool)
	// Free returns how many of the receiver's blocks the sender's view
	// shows free: free at the last view refresh, less those written since.
	Free() int
	// Refresh updates the sender's view of the receiver now (one status
	// READ). An error is final, as for TrySend.
	Refresh() error
}
