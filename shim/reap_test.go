package shim

import (
	"sync"
	"testing"
	"time"
)

// TestReaper: items run once each, in order, not before their grace, and
// the reaper's goroutine ends when the queue is empty and comes back for
// the next item.
func TestReaper(t *testing.T) {
	const grace = 20 * time.Millisecond
	r := newReaper(grace, 0, nil)
	var mu sync.Mutex
	var got []int
	var early []int
	done := make(chan struct{}, 10)
	add := func(i int) {
		start := time.Now()
		r.after(func() {
			mu.Lock()
			got = append(got, i)
			if time.Since(start) < grace {
				early = append(early, i)
			}
			mu.Unlock()
			done <- struct{}{}
		})
	}
	for i := range 5 {
		add(i)
	}
	for range 5 {
		<-done
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		running := r.running
		r.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reaper's goroutine did not end with an empty queue")
		}
		time.Sleep(time.Millisecond)
	}
	add(5)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 || len(early) != 0 {
		t.Fatalf("ran %v, early %v", got, early)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
}

// TestReaperSlack: items that fall due within reapSlack of each other are
// freed in one wake of the reaper, each still not before its grace.
func TestReaperSlack(t *testing.T) {
	r := newReaper(0, 0, nil)
	done := make(chan time.Duration, 2)
	start := time.Now()
	for _, grace := range []time.Duration{20 * time.Millisecond, 20*time.Millisecond + reapSlack*4/5} {
		r.at(start.Add(grace), func() { done <- time.Since(start) - grace })
	}
	for range 2 {
		if d := <-done; d < 0 {
			t.Fatalf("freed %v before its grace", -d)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rounds != 1 {
		t.Fatalf("two items due %v apart took %d wakes, want 1", reapSlack*4/5, r.rounds)
	}
}

// TestReaperIdleRelease: the release runs once the queue has stayed empty
// for idle, and only then; an item added while the reaper waits that out
// is freed at its grace, not after the wait.
func TestReaperIdleRelease(t *testing.T) {
	const idle = time.Second
	released := make(chan time.Time, 4)
	r := newReaper(time.Millisecond, idle, func() { released <- time.Now() })
	ran := make(chan time.Time, 4)
	r.after(func() { ran <- time.Now() })
	first := <-ran
	for waiting := false; !waiting; { // until the reaper waits out idle
		time.Sleep(time.Millisecond)
		r.mu.Lock()
		waiting = r.idling
		r.mu.Unlock()
		if !waiting && time.Since(first) > 5*time.Second {
			t.Fatal("the reaper never waited with its queue empty")
		}
	}
	added := time.Now()
	r.after(func() { ran <- time.Now() })
	select {
	case at := <-ran:
		if at.Sub(added) > idle/2 {
			t.Fatalf("an item added during the idle wait ran %v after it was added", at.Sub(added))
		}
	case <-released:
		t.Fatal("released with an item queued")
	case <-time.After(5 * time.Second):
		t.Fatal("the second item never ran")
	}
	select {
	case at := <-released:
		if at.Sub(first) < idle {
			t.Fatalf("released %v after the first item, before %v of idle", at.Sub(first), idle)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("never released")
	}
	r.mu.Lock()
	running := r.running
	r.mu.Unlock()
	if running {
		t.Fatal("the reaper's goroutine still runs after its release")
	}
	select {
	case <-released:
		t.Fatal("released twice")
	case <-time.After(100 * time.Millisecond):
	}
}
