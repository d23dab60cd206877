package wait

import "time"

// HybridPolicy polls a fixed number of times, then sleeps: the NAPI-style
// hybrid that seed 002 compares against. Under intermittent traffic whose
// gaps exceed the spin it pays the spin and a wakeup for every wait.
type HybridPolicy struct {
	Spin int // polls before sleeping (PollParams.Spin)
}

var _ WaitPolicy = HybridPolicy{}

// Budget returns Spin whatever the traffic.
func (h HybridPolicy) Budget(time.Time) int { return h.Spin }

// Observe ignores the wait.
func (HybridPolicy) Observe(time.Time, int, bool, int) {}
