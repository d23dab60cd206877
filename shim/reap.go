package shim

import (
	"sync"
	"time"
)

// reaper frees what closed connections leave behind once their grace has
// passed (a direct handle stays mapped for directGrace after it left the
// interposer's table): one goroutine for the whole process, asleep until
// the oldest deadline, instead of a goroutine and a timer per connection.
// A process that opens and closes connections fast otherwise woke the
// runtime once more per connection. Every item of a reaper waits the
// reaper's one grace, so its queue is in deadline order; a second reaper
// ends the deferrals nobody pulled (Process.deadlines, deferDeadline).
//
// Once the queue has stayed empty for idle, it runs release (nil: none)
// and its goroutine ends: the process gives the Go heap's free pages
// back (debug.FreeOSMemory) after a burst of connections closed. The
// runtime's scavenger otherwise keeps about a heap goal's worth mapped,
// which a server that served many short connections kept as resident
// memory (a soak server: 1.8 MiB of anonymous memory before its clients,
// 6.9 MiB long after the last one closed).
type reaper struct {
	mu      sync.Mutex
	q       []reapItem    // +checklocks:mu; in the order added, so deadlines ascend
	running bool          // +checklocks:mu
	rounds  int           // +checklocks:mu; wakes that found items due
	idling  bool          // +checklocks:mu; the goroutine waits out idle with the queue empty
	grace   time.Duration // how long each item waits
	idle    time.Duration
	release func()
	wake    chan struct{} // ends the idle wait when an item comes (capacity 1)
}

// newReaper returns a reaper whose items wait grace, and that runs
// release (nil: none) once its queue has been empty for idle.
func newReaper(grace, idle time.Duration, release func()) *reaper {
	return &reaper{grace: grace, idle: idle, release: release, wake: make(chan struct{}, 1)}
}

// idleRelease is how long the reaper's queue stays empty before the
// process gives its free heap pages back: one forced collection per
// burst of closes at most.
const idleRelease = time.Second

// reapSlack is how late the reaper may free an item, to free the items
// that fall due close together in one wake.
const reapSlack = 10 * time.Millisecond

// reapItem is one thing to free, at or after at.
type reapItem struct {
	at   time.Time
	free func()
}

// after runs free on the reaper's goroutine once its grace has passed.
// free must not wait long: the items behind it wait too.
func (r *reaper) after(free func()) { r.at(time.Now().Add(r.grace), free) }

// at queues free for at, which must not come before the last item's.
func (r *reaper) at(at time.Time, free func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q = append(r.q, reapItem{at: at, free: free})
	if r.idling {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	if !r.running {
		r.running = true
		go r.run()
	}
}

// run frees the items as they fall due and ends when none is left (with
// a release, once none has come for idle).
func (r *reaper) run() {
	for {
		r.mu.Lock()
		if len(r.q) == 0 && r.release != nil {
			r.idling = true
			r.mu.Unlock()
			t := time.NewTimer(r.idle)
			select {
			case <-t.C:
			case <-r.wake:
				t.Stop()
			}
			r.mu.Lock()
			r.idling = false
			if len(r.q) == 0 {
				r.running = false
				r.mu.Unlock()
				r.release()
				return
			}
			select { // a wake for an item already taken here
			case <-r.wake:
			default:
			}
		}
		if len(r.q) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		now := time.Now()
		n := 0
		for n < len(r.q) && !r.q[n].at.After(now) {
			n++
		}
		if n > 0 {
			r.rounds++
		}
		due := append([]reapItem(nil), r.q[:n]...)
		r.q = append(r.q[:0], r.q[n:]...)
		var wait time.Duration
		if n == 0 {
			// Late by up to reapSlack, so one wake frees every item that
			// fell due meanwhile: a process opening and closing
			// connections fast woke this goroutine about once per
			// connection (a context switch each, on a busy core).
			wait = r.q[0].at.Sub(now) + reapSlack
		}
		r.mu.Unlock()
		for _, it := range due {
			it.free()
		}
		if wait > 0 {
			time.Sleep(wait)
		}
	}
}
