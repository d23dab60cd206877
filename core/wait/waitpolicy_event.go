package wait

import "time"

// EventPolicy never polls: every wait arms its doorbell and sleeps (after
// the waiter's one check of the condition). Least CPU, a wakeup per wait.
type EventPolicy struct{}

var _ WaitPolicy = EventPolicy{}

// Budget returns 0: arm and sleep at once.
func (EventPolicy) Budget(time.Time) int { return 0 }

// Observe ignores the wait.
func (EventPolicy) Observe(time.Time, int, bool, int) {}
