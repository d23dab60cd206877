package wait

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nopBell is a doorbell that costs nothing, to measure the waiter alone.
type nopBell struct{}

func (nopBell) Arm() error            { return nil }
func (nopBell) Sleep(time.Time) error { return nil }
func (nopBell) Disarm()               {}

// BenchmarkWaiterReady: the condition holds at the first check, the cost
// a wait adds to a recv that finds data.
func BenchmarkWaiterReady(b *testing.B) {
	for _, mode := range WaitModes() {
		b.Run(mode, func(b *testing.B) {
			pol, err := NewWaitPolicy(mode, DefaultPollParams())
			if err != nil {
				b.Fatal(err)
			}
			w := NewWaiter(pol)
			ready := func() bool { return true }
			for b.Loop() {
				if err := w.Wait(ready, nopBell{}, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWaiterPolls: the condition holds at the n-th check, found by
// polling (hybrid with a budget above n); ns/poll includes the pauses and
// the sched_yield every yieldEvery polls.
func BenchmarkWaiterPolls(b *testing.B) {
	for _, n := range []int{2, 16, 64, 256, 1024} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			w := NewWaiter(HybridPolicy{Spin: n + 1})
			calls := 0
			ready := func() bool { calls++; return calls%n == 0 }
			for b.Loop() {
				if err := w.Wait(ready, nopBell{}, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls), "ns/poll")
		})
	}
}

// BenchmarkWaiterArm: event mode, the condition holds at the check after
// arming: one check, Arm, check, Disarm, with a free doorbell.
func BenchmarkWaiterArm(b *testing.B) {
	w := NewWaiter(EventPolicy{})
	calls := 0
	ready := func() bool { calls++; return calls%2 == 0 }
	for b.Loop() {
		if err := w.Wait(ready, nopBell{}, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWaiterBusyEveryP: every P of the process runs a busy wait and
// the goroutine that would end them becomes runnable (a timer fires): how
// long it waits for a P. The waiter's sched_yield leaves it to Go's
// asynchronous preemption (10-20 ms measured). Reports the median delay.
func BenchmarkWaiterBusyEveryP(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	var delays []time.Duration
	for b.Loop() {
		var flag atomic.Bool
		var wg sync.WaitGroup
		due := time.Now().Add(200 * time.Microsecond)
		var late time.Duration
		time.AfterFunc(time.Until(due), func() {
			late = time.Since(due)
			flag.Store(true)
		})
		for range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				NewWaiter(BusyPolicy{}).Wait(flag.Load, nopBell{}, time.Now().Add(time.Second))
			}()
		}
		wg.Wait()
		delays = append(delays, late)
	}
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "us-to-run")
}
