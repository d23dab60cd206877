package slidingwindow

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wait"
)

// The doorbells: a side sleeps on bellData for blocks to arrive and on
// bellSpace for acknowledgements to free ring slots. Both are counters of
// cqState.gen moved by drainLocked.
const (
	bellData = iota
	bellSpace
	numBells
)

// sleepers coordinates the goroutines sleeping on the receive completion
// queue. One of them at a time, the leader, arms the queue and polls its
// notification fd; the others wait for wake, which closes whenever a
// drain changed something or the leader returns.
type sleepers struct {
	leader  bool
	closing bool          // Close began: Sleep returns at once
	active  int           // goroutines in Sleep
	wake    chan struct{} // closed and replaced by broadcastLocked
	quiet   *sync.Cond    // on Transport.mu: active dropped to 0
}

func (s *sleepers) init(mu *sync.Mutex) {
	s.wake = make(chan struct{})
	s.quiet = sync.NewCond(mu)
}

func (s *sleepers) broadcastLocked() {
	if s.wake != nil {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

func (s *sleepers) waitQuietLocked() {
	s.broadcastLocked()
	for s.active > 0 {
		s.quiet.Wait()
	}
}

// bell is one waiter's wait.Doorbell.
type bell struct {
	t    *Transport
	id   int
	seen uint64 // cq.gen[id] when armed
}

// DataBell returns a new handle on the doorbell that rings when a block
// arrives. A handle serves one waiter at a time.
func (t *Transport) DataBell() wait.Doorbell { return &bell{t: t, id: bellData} }

// SpaceBell returns a new handle on the doorbell that rings when an
// acknowledgement frees ring slots.
func (t *Transport) SpaceBell() wait.Doorbell { return &bell{t: t, id: bellSpace} }

// Arm takes the queued completions and notes the bell's counter; the
// peer needs no telling. It returns the error that ended the transport.
func (b *bell) Arm() error {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drainLocked()
	b.seen = t.cq.gen[b.id]
	return t.err
}

// Disarm is free.
func (b *bell) Disarm() {}

// Sleep waits until the bell's counter moved since Arm, the deadline, the
// backstop or the end of the transport.
func (b *bell) Sleep(deadline time.Time) error {
	t := b.t
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.slp
	if s.closing {
		return t.err
	}
	s.active++
	defer func() {
		if s.active--; s.active == 0 && s.closing {
			s.quiet.Broadcast()
		}
	}()
	wakeBy := deadline
	if t.backstop > 0 {
		if bs := time.Now().Add(t.backstop); wakeBy.IsZero() || bs.Before(wakeBy) {
			wakeBy = bs
		}
	}
	for {
		t.drainLocked()
		switch {
		case t.cq.gen[b.id] != b.seen:
			return nil
		case t.err != nil:
			return t.err
		case passed(wakeBy):
			if passed(deadline) {
				return os.ErrDeadlineExceeded
			}
			return nil // backstop
		}
		if !s.leader {
			t.leadLocked(b, wakeBy)
			continue
		}
		w := s.wake
		t.mu.Unlock()
		waitChan(w, wakeBy)
		t.mu.Lock()
	}
}

// leadLocked makes the caller the leader for one poll of the notification
// fd, then hands leadership back and wakes the others. Consuming the old
// notification, then arming, then draining loses no completion: one that
// lands after the drain makes the fd readable.
//
// +checklocks:t.mu
func (t *Transport) leadLocked(b *bell, wakeBy time.Time) {
	s := &t.slp
	s.leader = true
	cq := t.link.BellRecvCQ
	t.mu.Unlock()
	cq.AckNotify()
	err := cq.Arm()
	t.mu.Lock()
	if err != nil {
		t.failLocked(err, false)
	}
	t.drainLocked()
	if t.cq.gen[b.id] == b.seen && t.err == nil {
		t.mu.Unlock()
		pollNotify(cq.NotifyFD(), t.kickFD, wakeBy)
		t.mu.Lock()
	}
	s.leader = false
	s.broadcastLocked()
}

// pollNotify waits until fd or kick is readable, or wakeBy (zero: no
// limit; long waits recheck every second).
func pollNotify(fd, kick int, wakeBy time.Time) {
	ms := 1000
	if !wakeBy.IsZero() {
		left := time.Until(wakeBy)
		if left <= 0 {
			return
		}
		ms = int(min((left+time.Millisecond-1)/time.Millisecond, 1000))
	}
	fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(kick), Events: unix.POLLIN}}
	unix.Poll(fds[:], ms) // EINTR and timeouts: the caller checks again
}

// waitChan waits for w to close or until wakeBy (zero: no limit).
func waitChan(w <-chan struct{}, wakeBy time.Time) {
	if wakeBy.IsZero() {
		<-w
		return
	}
	tm := time.NewTimer(time.Until(wakeBy))
	select {
	case <-w:
	case <-tm.C:
	}
	tm.Stop()
}

func passed(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }
