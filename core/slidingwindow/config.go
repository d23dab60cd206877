package slidingwindow

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Name is the transport's name in the setup exchange.
const Name = "slidingwindow"

// Config configures one side; Blocks, BlockSize and Flow must match the
// peer's. It has the fields of statusbyte.Config, so a caller picks the
// transport by name with the same values.
type Config struct {
	Blocks    int    // blocks per direction, 1..setup.MaxBlocks; 0 means 64
	BlockSize int    // bytes per block, header included, wire.HeaderSize+1..setup.MaxBlockSize; 0 means 64 KiB
	Flow      string // the flow controller's name, compared at setup
	// Backstop bounds each doorbell sleep: Sleep returns nil after it and
	// the waiter checks again. 0: none (the completion queue's
	// notification is reliable on every provider).
	Backstop time.Duration
	// Setup overrides the queue pair limits (MaxSend, MaxInline; MaxRings
	// is raised to what the ring needs); its other fields are ignored.
	Setup setup.SetupConfig
}

// maxQueue is the largest doorbell queue the transport asks for (the shm
// provider's limit on a work queue).
const maxQueue = 8192

func (c *Config) normalize() error {
	if c.Blocks == 0 {
		c.Blocks = 64
	}
	if c.BlockSize == 0 {
		c.BlockSize = 64 << 10
	}
	if c.Blocks < 1 || c.Blocks > setup.MaxBlocks || c.BlockSize <= wire.HeaderSize || c.BlockSize > setup.MaxBlockSize {
		return fmt.Errorf("slidingwindow: %d blocks of %d bytes (want 1..%d blocks, %d..%d bytes): %w",
			c.Blocks, c.BlockSize, setup.MaxBlocks, wire.HeaderSize+1, setup.MaxBlockSize, verbs.ErrInvalid)
	}
	if c.Backstop < 0 {
		return fmt.Errorf("slidingwindow: backstop %v: %w", c.Backstop, verbs.ErrInvalid)
	}
	return nil
}

// queueDepth is the doorbell queue pair's send and receive depth for n
// blocks: n writes, up to n acknowledgements (each moves the tail by at
// least one within a window of n) and the farewell, capped at maxQueue;
// past the cap a surplus acknowledgement waits for a receive (receiver
// not ready) or is retried at the next release, it is never lost.
func queueDepth(n int) int { return min(2*n+2, maxQueue) }
