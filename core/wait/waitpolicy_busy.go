package wait

import "time"

// BusyPolicy never sleeps: the waiter polls until the condition holds or
// the deadline passes. Lowest latency, one core per waiter; the baseline
// the adaptive policy is measured against.
type BusyPolicy struct{}

var _ WaitPolicy = BusyPolicy{}

// Budget returns -1: poll without limit.
func (BusyPolicy) Budget(time.Time) int { return -1 }

// Observe ignores the wait.
func (BusyPolicy) Observe(time.Time, int, bool, int) {}
