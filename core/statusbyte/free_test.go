package statusbyte

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
)

// TestFreeCount: Free follows the sender's view: down one per block
// written, up only when a status READ shows a release (a retained block
// is not free), never below zero or above the blocks.
func TestFreeCount(t *testing.T) {
	a, b := pair(t, Config{Blocks: 4, BlockSize: 128})
	if a.Free() != 4 {
		t.Fatalf("Free() = %d on a new channel", a.Free())
	}
	p := []byte("x")
	for i := 0; i < 4; i++ {
		mustSend(t, a, wire.BlockHeader{Stream: 1, Seq: uint32(i), Flags: wire.FlagData}, p)
		if got := a.Free(); got != 3-i {
			t.Fatalf("after %d sends Free() = %d", i+1, got)
		}
	}
	blks := []wire.Block{mustReceive(t, b), mustReceive(t, b), mustReceive(t, b)}
	b.Release(blks[0])
	b.Retain(blks[1])
	if a.Free() != 0 {
		t.Errorf("Free() = %d before the status READ", a.Free())
	}
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if a.Free() != 1 {
		t.Errorf("Free() = %d after one release and one retain", a.Free())
	}
	b.Release(blks[1])
	b.Release(blks[2])
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if a.Free() != 3 {
		t.Errorf("Free() = %d after three releases", a.Free())
	}
}
