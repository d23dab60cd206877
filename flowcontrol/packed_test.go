package flowcontrol_test

import (
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

var packedParams = flowcontrol.Params{ReceiveCapacity: 4 * 64, BlockPayload: 64}

func TestPackedNeverStalls(t *testing.T) {
	c := newController(t, flowcontrol.NamePacked, packedParams)
	if !c.Buffered() || c.AsyncFlush() || len(c.Open()) != 0 {
		t.Fatalf("packed: Buffered %v AsyncFlush %v Open %v", c.Buffered(), c.AsyncFlush(), c.Open())
	}
	for _, q := range []struct{ queued, msg, want int }{{0, 0, 0}, {1, 1, 1}, {40, 10, 40}, {300, 10, 64}} {
		if n := c.NextSegment(q.queued, q.msg, 64); n != q.want {
			t.Errorf("NextSegment(%d, %d, 64) = %d, want %d", q.queued, q.msg, n, q.want)
		}
	}
	if rec, ok := c.Consumed(64); ok {
		t.Fatalf("packed returned record %+v", rec)
	}
}

// TestPackedCoalescing: writes queued behind a full channel go out
// together; the bytes beyond the oldest write count as coalesced.
func TestPackedCoalescing(t *testing.T) {
	l := newLink(t, flowcontrol.NamePacked, packedParams, 1)
	l.write(10)
	l.send() // takes the only slot
	for range 5 {
		l.write(10)
		l.send() // channel full: held
	}
	l.consume()
	l.send() // one block: 10 bytes of the oldest write + 40 coalesced
	s := l.snd.(flowcontrol.StatsSource).Stats()
	if s.BlocksSent != 2 || s.BytesSent != 60 || s.CoalescedBytes != 40 {
		t.Fatalf("stats %+v, want 2 blocks, 60 bytes, 40 coalesced", s)
	}
	l.drain()
}

func TestPackedRejectsEveryRecord(t *testing.T) {
	c := newController(t, flowcontrol.NamePacked, packedParams)
	for _, rec := range []wire.ControlRecord{{Kind: wire.ControlCredit, Value: 1}, {Kind: wire.ControlWindow, Value: 64}, {}} {
		if err := c.OnControl(rec); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("OnControl(%+v) = %v, want ErrProtocol", rec, err)
		}
	}
}
