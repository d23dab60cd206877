package flowcontrol_test

import (
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

func newController(t testing.TB, name string, p flowcontrol.Params) wire.FlowController {
	t.Helper()
	mk, err := flowcontrol.New(name, p)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return mk()
}

var creditParams = flowcontrol.Params{Credits: 8, ReceiveCapacity: 8 * 64, BlockPayload: 64}

func TestCreditOneWritePerBlock(t *testing.T) {
	c := newController(t, flowcontrol.NameCredit, creditParams)
	if c.Buffered() || c.AsyncFlush() || len(c.Open()) != 0 {
		t.Fatalf("credit: Buffered %v AsyncFlush %v Open %v", c.Buffered(), c.AsyncFlush(), c.Open())
	}
	if n := c.NextSegment(300, 10, 64); n != 10 {
		t.Fatalf("NextSegment(300, 10, 64) = %d, want 10 (one write per block)", n)
	}
	if n := c.NextSegment(300, 200, 64); n != 64 {
		t.Fatalf("NextSegment(300, 200, 64) = %d, want 64", n)
	}
	if n := c.NextSegment(0, 0, 64); n != 0 {
		t.Fatalf("NextSegment(0, 0, 64) = %d", n)
	}
}

func TestCreditStallsWithoutCredits(t *testing.T) {
	c := newController(t, flowcontrol.NameCredit, creditParams)
	for range 8 {
		c.Sent(c.NextSegment(1, 1, 64))
	}
	for range 3 { // asked repeatedly while waiting: one stall
		if n := c.NextSegment(1, 1, 64); n != 0 {
			t.Fatalf("NextSegment with no credit = %d", n)
		}
	}
	if err := c.OnControl(wire.ControlRecord{Kind: wire.ControlCredit, Value: 4}); err != nil {
		t.Fatal(err)
	}
	if n := c.NextSegment(1, 1, 64); n != 1 {
		t.Fatalf("NextSegment after credits = %d", n)
	}
	s := c.(flowcontrol.StatsSource).Stats()
	if s.Stalls != 1 || s.AsyncFlushes != 0 || s.ControlReceived != 1 || s.BlocksSent != 8 {
		t.Fatalf("stats %+v", s)
	}
	if u := s.Utilisation(); u != 1.0/64 {
		t.Fatalf("utilisation %v, want 1/64", u)
	}
}

// TestCreditDelayedReturn: credits go back once half of K are consumed.
func TestCreditDelayedReturn(t *testing.T) {
	r := newController(t, flowcontrol.NameCredit, creditParams)
	for i := range 3 {
		if rec, ok := r.Consumed(10); ok {
			t.Fatalf("record %+v after %d blocks", rec, i+1)
		}
	}
	if rec, ok := r.Consumed(0); ok { // an empty (FIN) block is not flow-controlled
		t.Fatalf("record %+v for an empty block", rec)
	}
	rec, ok := r.Consumed(10)
	if want := (wire.ControlRecord{Kind: wire.ControlCredit, Value: 4}); !ok || rec != want {
		t.Fatalf("Consumed = %+v %v, want %+v", rec, ok, want)
	}
}

func TestCreditHostileRecords(t *testing.T) {
	c := newController(t, flowcontrol.NameCredit, creditParams)
	for range 3 {
		c.Sent(c.NextSegment(1, 1, 64))
	}
	for _, rec := range []wire.ControlRecord{
		{Kind: wire.ControlCredit, Value: 0},
		{Kind: wire.ControlCredit, Value: 4},
		{Kind: wire.ControlCredit, Value: ^uint32(0)},
		{Kind: wire.ControlWindow, Value: 1},
		{Kind: 0, Value: 1},
		{Kind: 200, Value: 1},
	} {
		if err := c.OnControl(rec); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("OnControl(%+v) = %v, want ErrProtocol", rec, err)
		}
	}
	if err := c.OnControl(wire.ControlRecord{Kind: wire.ControlCredit, Value: 3}); err != nil {
		t.Fatalf("a valid return after rejected ones: %v", err)
	}
	if err := c.OnControl(wire.ControlRecord{Kind: wire.ControlCredit, Value: 1}); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("a return with nothing outstanding: %v", err)
	}
}

func TestCreditArrivalBeyondCredits(t *testing.T) {
	r := newController(t, flowcontrol.NameCredit, creditParams)
	for range 8 {
		if err := r.Arrived(1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Arrived(1); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("ninth block with K=8: %v", err)
	}
	if _, ok := r.Consumed(1); ok {
		t.Fatal("record after one block")
	}
	for range 3 {
		r.Consumed(1)
	}
	if err := r.Arrived(1); err != nil { // 4 credits went back
		t.Fatalf("block after a credit return: %v", err)
	}
}
