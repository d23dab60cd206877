package wait

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Late runs when a wait's poll found its condition only after one of its
// yields gave the CPU to another thread: here a thread spinning on the
// waiter's CPU, the condition coming true a millisecond in. For a
// condition true at once it never runs.
func TestWaiterLate(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	pin := func() error {
		runtime.LockOSThread()
		return unix.SchedSetaffinity(0, &one)
	}
	unpin := func() {
		unix.SchedSetaffinity(0, &allowed)
		runtime.UnlockOSThread()
	}
	err := pin()
	unpin()
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
		pin()
		defer unpin()
		close(started)
		for !stop.Load() {
		}
		close(spun)
	}()
	<-started
	pin() // as it did above
	at := time.Now().Add(time.Millisecond)
	err = w.Wait(func() bool { return time.Now().After(at) }, &fakeBell{}, time.Now().Add(10*time.Second))
	unpin()
	stop.Store(true)
	<-spun
	if err != nil || late.Load() != 1 {
		t.Errorf("a condition that came while another thread held the CPU: %v, Late run %d times, want once", err, late.Load())
	}
}
