package mux_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
)

// Abort resets the peer even with nothing unread (SO_LINGER 0), and the
// stream is forgotten on both sides afterwards.
func TestStreamAbortResetsPeer(t *testing.T) {
	a, b := channelPair(t, smallTransport, mux.ChannelConfig{NewFlow: newOpenFlow})
	sa, sb := openPair(t, a, b)
	if n := sa.Unsent(); n != 0 {
		t.Fatalf("Unsent of a fresh stream: %d", n)
	}
	if err := sb.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := sb.Abort(); !errors.Is(err, mux.ErrStreamClosed) {
		t.Fatalf("second Abort: %v", err)
	}
	sa.SetReadDeadline(time.Now().Add(muxDeadline))
	if _, err := sa.Read(make([]byte, 1)); !errors.Is(err, mux.ErrReset) {
		t.Fatalf("peer read after Abort: %v, want a reset", err)
	}
	sa.Close()
	deadline := time.Now().Add(muxDeadline)
	for a.Streams()+b.Streams() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a.Streams()+b.Streams() != 0 {
		t.Errorf("streams left after Abort and Close: %d %d", a.Streams(), b.Streams())
	}
}
