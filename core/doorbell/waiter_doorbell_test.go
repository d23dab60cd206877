package doorbell_test

import (
	"testing"
	"time"
)

// TestDoorbellRingsOnlyWhenArmed counts the rings a side posts: none
// while the peer has not armed, one per arm however often it rings, none
// after a Disarm.
func TestDoorbellRingsOnlyWhenArmed(t *testing.T) {
	_, _, ba, bb := bellPair(t)
	ring := func(n int) {
		t.Helper()
		for range n {
			if err := bb.Ring(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	ring(100)
	if n := bb.RingsPosted(); n != 0 {
		t.Fatalf("%d rings posted with nobody armed, want 0", n)
	}
	h := ba.Doorbell(0)
	for arm := 1; arm <= 3; arm++ {
		if err := h.Arm(); err != nil {
			t.Fatal(err)
		}
		ring(10)
		if n := bb.RingsPosted(); n != uint64(arm) {
			t.Fatalf("arm %d: %d rings posted, want %d", arm, n, arm)
		}
		if err := h.Sleep(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("arm %d: Sleep = %v, want rung", arm, err)
		}
		ring(10) // disarmed by the wake
		if n := bb.RingsPosted(); n != uint64(arm) {
			t.Fatalf("after wake %d: %d rings posted, want %d", arm, n, arm)
		}
	}
	if err := h.Arm(); err != nil {
		t.Fatal(err)
	}
	h.Disarm()
	ring(10)
	if n := bb.RingsPosted(); n != 3 {
		t.Errorf("after Disarm: %d rings posted, want 3", n)
	}
	if n := ba.RingsPosted(); n != 0 {
		t.Errorf("the sleeping side posted %d rings, want 0", n)
	}
}
