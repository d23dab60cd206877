package mux

import "sync"

// Waiting outside Go. The shim's threads block in the kernel (a futex),
// not in Go, so that signals and cancellation behave as on kernel TCP.
// These calls let such a waiter be woken by the stream: SetNotify installs
// a function that streamEvent.signal calls after every event of the
// stream, and Attend keeps the channel's progress goroutines awake while
// the waiter sleeps (as a sleeping Read does) and has them wake the
// stream's event each time they wake (freed transport space raises no
// stream event of its own).

// attendance is a stream's count of outside waiters (streamEvent.outside).
type attendance struct {
	mu sync.Mutex
	n  int // Attend calls not undone; +checklocks:mu
}

// attendedBy indexes the attended streams by channel.
var attendedBy sync.Map // *Channel -> *attendedSet

// attendedSet is a channel's attended streams.
type attendedSet struct {
	mu      sync.Mutex
	streams map[*Stream]struct{}
}

// SetNotify sets the function called after every event of the stream
// (bytes arrived or sent, credits or windows, FIN, reset, the channel's
// end); nil removes it. It runs on whichever goroutine raised the event,
// possibly with the stream's lock held: it must not block or call into
// the stream.
func (s *Stream) SetNotify(fn func()) {
	if fn == nil {
		s.ev.notify.Store(nil)
		return
	}
	s.ev.notify.Store(&fn)
}

// Attend counts a waiter outside Go: until the matching Unattend the
// channel's progress goroutines stay awake for the stream and signal its
// event whenever they wake, and the stream counts as being in an
// application call (so held bytes keep flowing).
func (s *Stream) Attend() {
	a := &s.ev.outside
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n++; a.n > 1 {
		return
	}
	set, _ := attendedBy.LoadOrStore(s.c, &attendedSet{streams: map[*Stream]struct{}{}})
	as := set.(*attendedSet)
	as.mu.Lock()
	as.streams[s] = struct{}{}
	as.mu.Unlock()
	s.enter()
	s.c.prog.sleepers.Add(1)
	s.c.prog.writers.Add(1) // a blocked writer waits for space
	s.c.prog.kick(true)
}

// Unattend undoes one Attend.
func (s *Stream) Unattend() {
	a := &s.ev.outside
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		return
	}
	if a.n--; a.n > 0 {
		return
	}
	if set, ok := attendedBy.Load(s.c); ok {
		as := set.(*attendedSet)
		as.mu.Lock()
		delete(as.streams, s)
		as.mu.Unlock()
	}
	s.c.prog.sleepers.Add(-1)
	s.c.prog.writers.Add(-1)
	s.leave()
}

// wakeAttended signals the event of every attended stream of c: called by
// the progress goroutines after each doorbell sleep.
func (c *Channel) wakeAttended() {
	set, ok := attendedBy.Load(c)
	if !ok {
		return
	}
	as := set.(*attendedSet)
	as.mu.Lock()
	list := make([]*Stream, 0, len(as.streams))
	for s := range as.streams {
		list = append(list, s)
	}
	as.mu.Unlock()
	for _, s := range list {
		s.ev.signal()
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
