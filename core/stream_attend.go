package core

import (
	"sync"
	"time"
)

// Waiting outside Go. The shim's threads block in the kernel (futex,
// poll), not in Go, so that signals and cancellation behave as on kernel
// TCP; these calls let such a waiter be woken by the stream's events.
//
// Provisional implementation, kept in this file only: while a stream is
// attended, one goroutine keeps the channel's progress goroutines awake
// (as a waiting Read does) and calls the notify function after every
// event of the stream. A direct call from streamEvent.signal and from the
// progress goroutines after a space ring would spare that goroutine.

// attendance is a stream's outside-waiter state, kept beside the Stream.
type attendance struct {
	mu     sync.Mutex
	notify func()
	n      int           // Attend calls not undone
	stop   chan struct{} // closed to end the watcher; nil while n == 0
}

var attendances sync.Map // *Stream -> *attendance

func (s *Stream) attendance() *attendance {
	if a, ok := attendances.Load(s); ok {
		return a.(*attendance)
	}
	a, _ := attendances.LoadOrStore(s, new(attendance))
	return a.(*attendance)
}

// SetNotify sets the function called after events of the stream (bytes
// arrived or sent, credits or windows, FIN, reset, the channel's end)
// while the stream is attended; nil removes it. It runs on a goroutine of
// the stream's and must not block.
func (s *Stream) SetNotify(fn func()) {
	a := s.attendance()
	a.mu.Lock()
	a.notify = fn
	a.mu.Unlock()
	if fn == nil {
		a.mu.Lock()
		idle := a.n == 0
		a.mu.Unlock()
		if idle {
			attendances.Delete(s)
		}
	}
}

// Attend counts a waiter outside Go: until the matching Unattend the
// channel's progress goroutines stay awake for the stream, the notify
// function runs after its events, and the stream counts as being in an
// application call (so a packed stream's held bytes keep flowing).
func (s *Stream) Attend() {
	a := s.attendance()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n++; a.n > 1 {
		return
	}
	a.stop = make(chan struct{})
	s.enter()
	s.c.prog.sleepers.Add(1)
	s.c.prog.writers.Add(1) // a packed stream's held bytes flush as space frees
	s.c.prog.kick(true)
	go s.watch(a, a.stop, s.ev.gen.Load()) // events from now on are seen
}

// Unattend undoes one Attend.
func (s *Stream) Unattend() {
	a := s.attendance()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		return
	}
	if a.n--; a.n > 0 {
		return
	}
	close(a.stop)
	a.stop = nil
	s.c.prog.sleepers.Add(-1)
	s.c.prog.writers.Add(-1)
	s.leave()
	s.ev.signal() // wakes the watcher, which sees stop
}

// watch calls notify after every event until stop is closed.
func (s *Stream) watch(a *attendance, stop chan struct{}, seen uint64) {
	for {
		s.ev.wait(seen, time.Time{})
		select {
		case <-stop:
			return
		default:
		}
		seen = s.ev.gen.Load()
		a.mu.Lock()
		fn := a.notify
		a.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// Drained reports whether the stream has sent everything it will send:
// no bytes or records queued, and its FIN or reset gone (or the channel
// ended). Used after Close to know the peer has every byte in its memory.
func (s *Stream) Drained() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return true
	}
	return s.queued == 0 && len(s.ctrlOut) == 0 && !s.announce &&
		(s.finOut == finSent || s.resetOut == finSent)
}
