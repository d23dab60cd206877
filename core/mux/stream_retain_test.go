package mux_test

import (
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/statusbyte"
)

// TestRetainedBlockNoHeadOfLine: one stream's reader stops; its blocks
// are retained and capped, and another stream on the same channel keeps
// moving data.
func TestRetainedBlockNoHeadOfLine(t *testing.T) {
	a, b, ta, _ := channelPairT(t, statusbyte.Config{Blocks: 8, BlockSize: 1024}, mux.ChannelConfig{NewFlow: newOpenFlow})
	stuckA, stuckB := openPair(t, a, b)
	liveA, liveB := openPair(t, a, b)
	// The stuck stream's writer fills what it may and then waits.
	stuckDone := make(chan error, 1)
	go func() {
		stuckA.SetWriteDeadline(time.Now().Add(muxDeadline))
		_, err := stuckA.Write(make([]byte, 1<<20))
		stuckDone <- err
	}()
	deadline := time.Now().Add(muxDeadline)
	for stuckB.Buffered() < 3*1008 && time.Now().Before(deadline) {
		stuckB.ReadReady() // pumps: the stuck stream's blocks arrive and are retained
	}
	const total = 2 << 20
	go func() {
		if _, err := sendRandom(liveA, 1, total, 8000); err != nil {
			t.Errorf("live writer: %v", err)
		}
		liveA.CloseWrite()
	}()
	n, _, err := recvAll(liveB, 1, 4096)
	if err != nil || n != total {
		t.Fatalf("live stream moved %d of %d bytes beside a stuck one: %v", n, total, err)
	}
	st := ta.Stats()
	t.Logf("sender: %+v; stuck stream holds %d blocks, retained=%v", st, heldOf(ta, stuckA.ID()), ta.Retained(stuckA.ID()))
	if !ta.Retained(stuckA.ID()) || st.SkippedRetained == 0 {
		t.Errorf("the stuck stream's blocks were not retained")
	}
	// The stuck reader resumes: everything arrives.
	readDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<16)
		for got := 0; got < 1<<20; {
			k, err := stuckB.Read(buf)
			if err != nil {
				readDone <- err
				return
			}
			got += k
		}
		readDone <- nil
	}()
	select {
	case err := <-stuckDone:
		if err != nil {
			t.Fatalf("stuck writer: %v", err)
		}
	case <-time.After(muxDeadline):
		t.Fatal("the stuck stream never drained")
	}
	if err := <-readDone; err != nil {
		t.Fatalf("stuck reader: %v", err)
	}
}

func heldOf(t *statusbyte.Transport, stream uint32) int {
	n, _ := t.Held(stream)
	return n
}
