package wait

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/internal/cpupin"
)

// Late runs when a wait's poll found its condition only after one of its
// yields gave the CPU to another thread: here a thread spinning on the
// waiter's CPU, the condition coming true a millisecond in. For a
// condition true at once it never runs.
func TestWaiterLate(t *testing.T) {
	cpu, err := cpupin.First()
	if err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	err = cpu.Pin()
	cpu.Unpin()
	if err != nil {
		t.Skipf("cannot pin a thread to a CPU here: %v", err)
	}

	p, err := NewWaitPolicy("busy", DefaultPollParams())
	if err != nil {
		t.Fatal(err)
	}
	w := NewWaiter(p)
	var late atomic.Int32
	w.Late = func() { late.Add(1) }

	if err := w.Wait(func() bool { return true }, &fakeBell{}, time.Time{}); err != nil || late.Load() != 0 {
		t.Fatalf("a condition true at once: %v, Late run %d times, want never", err, late.Load())
	}

	var stop atomic.Bool
	started, spun := make(chan struct{}), make(chan struct{})
	go func() { // another thread that wants the waiter's CPU
		cpu.Pin() // as it did above
		defer cpu.Unpin()
		close(started)
		for !stop.Load() {
		}
		close(spun)
	}()
	<-started
	cpu.Pin()
	at := time.Now().Add(time.Millisecond)
	err = w.Wait(func() bool { return time.Now().After(at) }, &fakeBell{}, time.Now().Add(10*time.Second))
	cpu.Unpin()
	stop.Store(true)
	<-spun
	if err != nil || late.Load() != 1 {
		t.Errorf("a condition that came while another thread held the CPU: %v, Late run %d times, want once", err, late.Load())
	}
}
