package shim

import (
	"testing"

	"github.com/sdpshim/sdpshim/shim/config"
)

// TestSubWrite: SDPSHIM_PREEMPT's sub-write size becomes whole blocks of
// payload for the channel; 0 turns preemption off.
func TestSubWrite(t *testing.T) {
	base := config.Config{BlockSize: 4096, Blocks: 64}
	for _, tt := range []struct {
		preempt bool
		chunk   int
		want    int
	}{
		{false, 0, -1},
		{true, 4096, 4000},      // one block
		{true, 3 * 4096, 12000}, // three blocks
		{true, 5000, 4000},      // rounded down to whole blocks
	} {
		c := base
		c.Preempt, c.PreemptChunk = tt.preempt, tt.chunk
		if got := subWrite(c, 4000); got != tt.want {
			t.Errorf("SDPSHIM_PREEMPT on=%v chunk=%d: sub-write %d, want %d", tt.preempt, tt.chunk, got, tt.want)
		}
	}
}
