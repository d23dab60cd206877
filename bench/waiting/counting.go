package waiting

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
)

// waitCounts gathers what the policies of one process's channel saw: the
// channel makes one policy per waiter and each countingPolicy reports
// here.
type waitCounts struct {
	waits, hits, sleeps atomic.Uint64

	mu       sync.Mutex
	switches []wait.ModeSwitcher // policies that have modes; +checklocks:mu
}

// factory returns a constructor of counted policies of mode, or the error
// of wait.NewWaitPolicy.
func (c *waitCounts) factory(mode string) (func() wait.WaitPolicy, error) {
	params := wait.DefaultPollParams()
	if _, err := wait.NewWaitPolicy(mode, params); err != nil {
		return nil, err
	}
	return func() wait.WaitPolicy {
		p, err := wait.NewWaitPolicy(mode, params)
		if err != nil {
			panic(err) // checked above
		}
		if ms, ok := p.(wait.ModeSwitcher); ok {
			c.mu.Lock()
			c.switches = append(c.switches, ms)
			c.mu.Unlock()
		}
		return &countingPolicy{inner: p, c: c}
	}, nil
}

// modeSwitches sums the mode switches of every policy made. Call it when
// no wait is in progress: a policy is not safe for concurrent use.
func (c *waitCounts) modeSwitches() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, s := range c.switches {
		n += s.ModeSwitches()
	}
	return n
}

// countingPolicy passes every call to inner and counts the finished
// waits: hits (found by polling or by the check after arming) and sleeps
// (ended by an event after sleeping: a wakeup).
type countingPolicy struct {
	inner wait.WaitPolicy
	c     *waitCounts
}

// Budget is inner's.
func (p *countingPolicy) Budget(now time.Time) int { return p.inner.Budget(now) }

// Observe passes the wait on and counts it.
func (p *countingPolicy) Observe(now time.Time, polls int, hit bool, events int) {
	p.inner.Observe(now, polls, hit, events)
	p.c.waits.Add(1)
	switch {
	case hit:
		p.c.hits.Add(1)
	case events > 0:
		p.c.sleeps.Add(1)
	}
}
