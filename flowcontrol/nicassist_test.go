package flowcontrol_test

import (
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

var nicParams = flowcontrol.Params{VirtualWindow: 100, ReceiveCapacity: 350, BlockPayload: 64}

func window(v uint32) wire.ControlRecord {
	return wire.ControlRecord{Kind: wire.ControlWindow, Value: v}
}

func TestNICAssistOpenPostsWhatFits(t *testing.T) {
	r := newController(t, flowcontrol.NameNICAssist, nicParams)
	if !r.Buffered() || !r.AsyncFlush() {
		t.Fatalf("nicassist: Buffered %v AsyncFlush %v", r.Buffered(), r.AsyncFlush())
	}
	if got := r.Open(); len(got) != 1 || got[0] != window(300) {
		t.Fatalf("Open() = %+v, want one post of 3 windows (300 bytes)", got)
	}
}

func TestNICAssistSegmentsToWindow(t *testing.T) {
	s := newController(t, flowcontrol.NameNICAssist, nicParams)
	if n := s.NextSegment(50, 50, 64); n != 0 {
		t.Fatalf("NextSegment before any post = %d", n)
	}
	if err := s.OnControl(window(100)); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, want := range []int{64, 36, 0} {
		n := s.NextSegment(500, 500, 64)
		if n != want {
			t.Fatalf("after %d bytes: NextSegment = %d, want %d", sent, n, want)
		}
		s.Sent(n)
		sent += n
	}
	if err := s.OnControl(window(100)); err != nil {
		t.Fatal(err)
	}
	// Both posts ended a stall: the progress goroutine flushes each time.
	st := s.(flowcontrol.StatsSource).Stats()
	if st.Stalls != 2 || st.AsyncFlushes != 2 || st.ControlReceived != 2 {
		t.Fatalf("stats %+v, want 2 stalls, 2 async flushes, 2 records", st)
	}
}

func TestNICAssistPostsPerWindowConsumed(t *testing.T) {
	r := newController(t, flowcontrol.NameNICAssist, nicParams)
	r.Open()
	if _, ok := r.Consumed(64); ok {
		t.Fatal("post after 64 of 100 bytes")
	}
	if rec, ok := r.Consumed(64); !ok || rec != window(100) {
		t.Fatalf("Consumed = %+v %v, want a window of 100", rec, ok)
	}
	if rec, ok := r.Consumed(64); ok {
		t.Fatalf("post %+v after 92 bytes", rec)
	}
	if rec, ok := r.Consumed(64); !ok || rec != window(100) {
		t.Fatalf("Consumed = %+v %v, want a window of 100", rec, ok)
	}
}

func TestNICAssistHostileRecords(t *testing.T) {
	s := newController(t, flowcontrol.NameNICAssist, nicParams)
	if err := s.OnControl(window(300)); err != nil {
		t.Fatal(err)
	}
	s.Sent(s.NextSegment(64, 64, 64))
	for _, rec := range []wire.ControlRecord{
		window(0),
		window(150),        // not whole windows
		window(200),        // 236 open + 200 > 350
		window(^uint32(0)), // overflow
		{Kind: wire.ControlCredit, Value: 1},
		{Kind: 9, Value: 100},
	} {
		if err := s.OnControl(rec); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("OnControl(%+v) = %v, want ErrProtocol", rec, err)
		}
	}
	s.Sent(s.NextSegment(64, 64, 64))
	if err := s.OnControl(window(100)); err != nil { // 172 + 100 fits
		t.Fatalf("a valid post after rejected ones: %v", err)
	}
}

func TestNICAssistArrivalBeyondWindow(t *testing.T) {
	r := newController(t, flowcontrol.NameNICAssist, nicParams)
	r.Open()
	a := r
	if err := a.Arrived(300); err != nil {
		t.Fatal(err)
	}
	if err := a.Arrived(1); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("byte beyond the posted window: %v", err)
	}
}
