package wait

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// eventfdBell is a doorbell made the way the channel makes one: an armed
// flag in memory both sides see and an eventfd the ringer writes. The
// waiter stores the flag, then checks its condition; the ringer publishes
// its data, then takes the flag: with both sequentially consistent one of
// them sees the other, so no wakeup is lost.
type eventfdBell struct {
	fd    int
	armed atomic.Uint32
	rings atomic.Uint64
	arms  atomic.Uint64
	late  atomic.Uint64 // Disarm found the ring already taken: data landed between Arm and the re-check
	rng   *rand.Rand    // widens the window after arming; used by the one waiting side
}

func newEventfdBell(t *testing.T) *eventfdBell {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Skipf("eventfd: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &eventfdBell{fd: fd}
}

func (b *eventfdBell) Arm() error {
	b.arms.Add(1)
	b.armed.Store(1)
	if b.rng != nil && b.rng.IntN(2) == 0 { // let the peer publish before the re-check
		for range b.rng.IntN(1000) {
			cpuPause()
		}
	}
	return nil
}

// Ring is the peer's side: called after publishing, it rings only when
// the waiter armed.
func (b *eventfdBell) Ring() {
	if b.armed.CompareAndSwap(1, 0) {
		b.rings.Add(1)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		if _, err := unix.Write(b.fd, one[:]); err != nil {
			panic(err)
		}
	}
}

func (b *eventfdBell) Disarm() {
	if b.armed.Swap(0) == 0 {
		b.late.Add(1)
		b.drain() // it rang meanwhile; a ring still in flight is a spurious wake later
	}
}

func (b *eventfdBell) Sleep(deadline time.Time) error {
	for {
		timeout := -1
		if !deadline.IsZero() {
			timeout = int((time.Until(deadline) + time.Millisecond - 1) / time.Millisecond)
			if timeout <= 0 {
				if b.armed.Swap(0) == 0 {
					b.drain()
					return nil // rung just in time
				}
				return os.ErrDeadlineExceeded
			}
		}
		fds := []unix.PollFd{{Fd: int32(b.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 {
			b.drain()
			b.armed.Store(0)
			return nil
		}
	}
}

func (b *eventfdBell) drain() {
	var buf [8]byte
	unix.Read(b.fd, buf[:]) // EAGAIN when empty
}

var _ Doorbell = (*eventfdBell)(nil)

// Two goroutines hand a counter back and forth, each waiting for the
// other through a Waiter and an eventfd doorbell, with random delays that
// land the data before, during and after the waiter's arm and re-check.
// A lost wakeup shows as a wait that reaches its deadline; the test fails
// then instead of hanging.
func TestWaiterNoLostWakeup(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	hybrid := func(n int) func() WaitPolicy { return func() WaitPolicy { return HybridPolicy{Spin: n} } }
	adaptive := func() WaitPolicy {
		p := DefaultPollParams()
		p.Min, p.Max, p.Period = 1, 64, MinPollPeriod
		a, err := NewAdaptivePolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		name   string
		policy func() WaitPolicy
	}{
		{"event", func() WaitPolicy { return EventPolicy{} }},
		{"hybrid1", hybrid(1)},
		{"hybrid20", hybrid(20)},
		{"adaptive", adaptive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, space := newEventfdBell(t), newEventfdBell(t)
			data.rng, space.rng = rand.New(rand.NewPCG(3, 7)), rand.New(rand.NewPCG(4, 7))
			var sent, acked atomic.Int64
			errc := make(chan error, 2)
			var wg sync.WaitGroup
			side := func(seed uint64, bell *eventfdBell, mine, theirs *atomic.Int64, ring *eventfdBell, first bool) {
				defer wg.Done()
				w := NewWaiter(tc.policy())
				rng := rand.New(rand.NewPCG(seed, 7))
				for i := int64(1); i <= int64(rounds); i++ {
					if !first {
						if err := awaitCount(w, bell, theirs, i); err != nil {
							errc <- err
							return
						}
					}
					raceJitter(rng)
					mine.Store(i)
					ring.Ring()
					if first {
						if err := awaitCount(w, bell, theirs, i); err != nil {
							errc <- err
							return
						}
					}
				}
			}
			wg.Add(2)
			go side(1, space, &sent, &acked, data, true)  // producer: sends i, waits for ack i
			go side(2, data, &acked, &sent, space, false) // consumer: waits for i, acks it
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("hung: a waiter neither woke nor reached its deadline")
			}
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			for _, b := range []*eventfdBell{data, space} {
				if b.rings.Load() > b.arms.Load() {
					t.Errorf("%d rings for %d arms", b.rings.Load(), b.arms.Load())
				}
			}
			for _, b := range []*eventfdBell{data, space} {
				t.Logf("%d rounds: %d arms, %d rings, %d rings between arm and re-check",
					rounds, b.arms.Load(), b.rings.Load(), b.late.Load())
			}
		})
	}
}

func awaitCount(w *Waiter, bell Doorbell, counter *atomic.Int64, want int64) error {
	err := w.Wait(func() bool { return counter.Load() >= want }, bell, time.Now().Add(20*time.Second))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errors.New("lost wakeup: a wait reached its deadline with the data published")
	}
	return err
}

// raceJitter delays by nothing, a few spins, a yield or a short sleep.
func raceJitter(rng *rand.Rand) {
	switch rng.IntN(8) {
	case 0, 1:
	case 2, 3, 4:
		for range rng.IntN(200) {
			cpuPause()
		}
	case 5, 6:
		schedYield()
	case 7:
		time.Sleep(time.Duration(rng.IntN(20)) * time.Microsecond)
	}
}
