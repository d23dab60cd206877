package shim

import (
	"errors"
	"time"
)

// Blocking. A call that cannot go on first polls its condition for the
// wait policy's budget (wait.Waiter: adaptive, busy, event or hybrid, as
// SDPSHIM_POLL says); then it registers its thread (attend.go), checks
// once more, and returns WaitResult: the interposer sleeps in the kernel
// on the socket's wake word (wake.go) and calls the hook again, which
// retries. Deadlines (SO_RCVTIMEO, SO_SNDTIMEO) are kept with the
// registration across the sleep.

// errKernelSleep ends the waiter's polling: the sleep happens in C.
var errKernelSleep = errors.New("sleep in the kernel")

// kernelBell is the wait.Doorbell the shim's waiters use: arming it fails,
// which ends wait.Waiter.Wait after its polling (and one last check).
type kernelBell struct{}

func (kernelBell) Arm() error            { return errKernelSleep }
func (kernelBell) Sleep(time.Time) error { return errKernelSleep }
func (kernelBell) Disarm()               {}

// block waits for ready: polls per policy, then registers a kernel sleep.
// It returns true when the caller should try again now (ready, or the
// deadline passed: the caller checks), false when w is filled for a
// kernel sleep (the hook returns WaitResult). done is the progress the
// call made so far.
//
// The sleep has no kernel timeout, so the kernel restarts it after a
// signal handler installed with SA_RESTART, as it does a blocking recv:
// a deadline is a Go timer that rings the wake word (kept with the
// attendance, stopped when the thread comes back).
func (s *Socket) block(w *Wait, write bool, deadline int64, done uint64, ready func() bool) bool {
	waiter := s.rdWait
	if write {
		waiter = s.wrWait
	}
	var dl time.Time
	if deadline > 0 {
		dl = clockEpoch.Add(time.Duration(deadline))
	}
	if err := waiter.Wait(ready, kernelBell{}, dl); err != errKernelSleep {
		return true
	}
	if ds := s.direct(); ds != nil {
		return s.blockDirect(ds, w, write, deadline, done)
	}
	gen := s.wake.gen()
	wake := time.Duration(-1)
	if deadline > 0 {
		wake = time.Duration(max(deadline-nowNS(), 0))
	}
	s.sleepBegin(write, deadline, wake)
	if ready() {
		s.resume(write)
		return true
	}
	*w = Wait{Kind: WaitFutex, Word: s.wake.word, Val: gen, Timeout: -1, Done: done}
	return false
}

// clockEpoch anchors nowNS: monotonic nanoseconds.
var clockEpoch = time.Now()

func nowNS() int64 { return int64(time.Since(clockEpoch)) + 1 }

// deadlineOf returns the deadline of a call: the one kept across its
// sleep, or a fresh one from the timeout (0: none).
func deadlineOf(kept int64, back bool, timeout int64) int64 {
	if back {
		return kept
	}
	if timeout > 0 {
		return nowNS() + timeout
	}
	return 0
}

// passed reports whether deadline (0: none) has passed.
func passed(deadline int64) bool { return deadline > 0 && nowNS() >= deadline }

// woke tells the wait policy that a thread came back from its kernel
// sleep: that wait ended with an event (the policy's traffic sample),
// which wait.Waiter.Wait could not see, since the sleep happened in C.
func (s *Socket) woke(write bool) {
	waiter := s.rdWait
	if write {
		waiter = s.wrWait
	}
	waiter.Woken()
}
