package wait

import (
	"os"
	"sync"
	"time"
)

// Waiter runs the waits of the transport (docs/design.md, "Waiting"): recv with
// no data, send with no free block, poll/epoll over managed fds, the
// progress goroutine. It polls a condition up to its policy's budget, then
// arms a doorbell, checks once more and sleeps.
//
// Wait may be called from several goroutines at once. They share the
// policy, serialised by a mutex held only while the policy is consulted
// (never while polling or sleeping), and the counters.
type Waiter struct {
	mu       sync.Mutex
	policy   WaitPolicy   // +checklocks:mu
	switcher ModeSwitcher // policy, when it has modes; +checklocks:mu
	c        waiterCounters

	// Late, when not nil (set before the first Wait, never after), is
	// called by a Wait whose poll found the condition true only after one
	// of its yields gave the CPU to another thread: the wait lost the CPU
	// and its event came late (preemption's starved mark, preload/c/
	// direct.c). It runs on the waiting goroutine and must be cheap.
	Late func()
}

// YieldRanOther: a sched_yield that took this long gave the CPU to
// another thread (the direct path's SDP_YIELD_RAN_OTHER_NS, which
// core/direct's tests hold it against).
const YieldRanOther = 4 * time.Microsecond

// NewWaiter returns a waiter that owns p; p must not be shared with
// another waiter (see NewWaitPolicy). It panics if p is nil.
func NewWaiter(p WaitPolicy) *Waiter {
	if p == nil {
		panic("core: NewWaiter with a nil WaitPolicy")
	}
	w := &Waiter{policy: p}
	w.switcher, _ = p.(ModeSwitcher)
	return w
}

// Wait returns nil once ready() is true, os.ErrDeadlineExceeded when the
// deadline (zero: none) passes first, or the error of bell's Arm or Sleep
// (the channel ended). Ready wins: when ready() is true right after the
// doorbell failed, Wait returns nil and the caller meets the failure at
// its next wait.
//
// ready is called from a tight loop: it must be cheap (a load of a shared
// word), free of side effects, and must not block.
//
// Wait checks ready once (a condition already true costs that check, one
// clock read and the policy's bookkeeping), then polls until it has made
// the policy's budget of checks in all, with a CPU pause between two
// checks and a sched_yield and deadline check every yieldEvery checks; a
// negative budget polls until ready or the deadline and never sleeps.
// Then, unless the deadline has passed: Arm, check once more (true:
// Disarm, done), Sleep, check; a wake without the condition (a ring meant
// for another waiter, a stale ring) arms and sleeps again. Each wait is
// reported to the policy: the checks made while polling, hit when it
// ended without sleeping, and one event when it ended ready.
func (w *Waiter) Wait(ready func() bool, bell Doorbell, deadline time.Time) error {
	if ready() {
		w.quick(waiterNow())
		return nil
	}
	budget := w.begin(waiterNow())
	polls, ok, lost, err := w.spin(ready, budget, deadline)
	if ok && lost && w.Late != nil {
		w.Late()
	}
	slept := false
	if !ok && err == nil {
		ok, slept, err = w.sleep(ready, bell, deadline)
	}
	events := 0
	if ok {
		events, err = 1, nil
	}
	w.end(waiterNow(), polls, ok && !slept, events)
	return err
}

// spin polls ready until the budget is spent; the check Wait made first
// counts as the first poll. lost reports that one of its yields gave the
// CPU to another thread (timed only when Late is set).
func (w *Waiter) spin(ready func() bool, budget int, deadline time.Time) (polls int, ok, lost bool, err error) {
	defer func() { w.c.polls.Add(uint64(polls)) }()
	polls = 1
	for budget < 0 || polls < budget {
		if polls%yieldEvery != 0 {
			cpuPause()
		} else {
			if w.Late != nil && !lost {
				t0 := time.Now()
				schedYield()
				lost = time.Since(t0) >= YieldRanOther
			} else {
				schedYield()
			}
			w.c.yields.Add(1)
			if expired(deadline) {
				return polls, false, lost, os.ErrDeadlineExceeded
			}
		}
		polls++
		if ready() {
			return polls, true, lost, nil
		}
	}
	return polls, false, lost, nil
}

// sleep arms, re-checks and sleeps until ready, the deadline or an error.
func (w *Waiter) sleep(ready func() bool, bell Doorbell, deadline time.Time) (ok, slept bool, err error) {
	for {
		if expired(deadline) {
			return false, slept, os.ErrDeadlineExceeded
		}
		armErr := bell.Arm()
		w.c.polls.Add(1)
		if ready() {
			if armErr == nil {
				bell.Disarm()
			}
			return true, slept, nil
		}
		if armErr != nil {
			return false, slept, armErr
		}
		w.c.sleeps.Add(1)
		slept = true
		err := bell.Sleep(deadline)
		w.c.polls.Add(1)
		if ready() {
			return true, true, nil
		}
		if err != nil {
			return false, true, err
		}
	}
}

// quick accounts a wait whose first check found the condition.
func (w *Waiter) quick(now time.Time) {
	w.mu.Lock()
	b := w.policy.Budget(now)
	w.policy.Observe(now, 1, true, 1)
	w.publishLocked(b, true)
	w.mu.Unlock()
	w.c.waits.Add(1)
	w.c.polls.Add(1)
	w.c.hits.Add(1)
}

// Woken reports a sleep the caller made outside Wait that an event ended:
// Wait returned its doorbell's Arm error after polling (a doorbell that
// hands the sleep to the caller, e.g. the shim's sleep in the kernel),
// the caller slept and was woken with its condition true. The policy
// sees a wait of no polls, not a hit, with one event (AdaptivePolicy:
// leaves event mode, grants the next wait); the stats count a sleep.
func (w *Waiter) Woken() {
	now := waiterNow()
	w.mu.Lock()
	w.policy.Budget(now)
	w.policy.Observe(now, 0, false, 1)
	w.publishLocked(0, false)
	w.mu.Unlock()
	w.c.sleeps.Add(1)
}

// begin asks the policy for this wait's budget.
func (w *Waiter) begin(now time.Time) int {
	w.mu.Lock()
	b := w.policy.Budget(now)
	w.publishLocked(b, true)
	w.mu.Unlock()
	return b
}

// end reports a wait to the policy.
func (w *Waiter) end(now time.Time, polls int, hit bool, events int) {
	w.mu.Lock()
	w.policy.Observe(now, polls, hit, events)
	w.publishLocked(0, false)
	w.mu.Unlock()
	w.c.waits.Add(1)
	if hit {
		w.c.hits.Add(1)
	}
}

// publishLocked copies the policy's mode switch count into the counters,
// and budget when handing one out (have).
//
// +checklocks:w.mu
func (w *Waiter) publishLocked(budget int, have bool) {
	if have && int64(budget) != w.c.budget.Load() {
		w.c.budget.Store(int64(budget))
	}
	if w.switcher != nil {
		if n := w.switcher.ModeSwitches(); n != w.c.switches.Load() {
			w.c.switches.Store(n)
		}
	}
}

func expired(deadline time.Time) bool {
	return !deadline.IsZero() && time.Until(deadline) <= 0
}

// clockEpoch anchors waiterNow.
var clockEpoch = time.Now()

// waiterNow is the time handed to the policy, read from the monotonic
// clock only: time.Since of a time that carries a monotonic reading skips
// the wall clock, which halves the cost of the read (48 ns for time.Now,
// 27 ns here on the development VM: most of a wait that finds its
// condition at once). The result carries a monotonic reading, so Before
// and Sub between two of them are exact; its wall part ignores steps of
// the wall clock. expired relies on the same shortcut in time.Until.
func waiterNow() time.Time { return clockEpoch.Add(time.Since(clockEpoch)) }
