package wait

import (
	"math"
	"time"
)

// AdaptivePolicy is seed 002's traffic-adaptive hybrid polling: the poll
// budget follows the traffic trend, and a waiter whose polling keeps
// finding nothing stops polling until the next event. Not safe for
// concurrent use (the Waiter serialises it).
//
// The rule. Time is cut into periods of Params.Period, the first starting
// at the first call. A period counts events (the traffic: Observe's
// events), hits (waits that found their condition without sleeping) and
// misses (waits that polled, then slept or gave up). When a call's now
// reaches a period's end (a call exactly at the end belongs to the next
// period) the period is closed:
//
//  1. Trend. Its event count becomes the newest traffic sample s3; with
//     the two before it, s1 and s2, the slopes are d1 = s2-s1, d2 = s3-s2
//     and, with D = Delta:
//     rise, d2 > D and d1 >= -D: budget *= Alpha;
//     fall, d2 < -D and d1 <= D: budget *= Beta;
//     otherwise the budget is unchanged; then it is clamped to [Min, Max].
//     The newest slope gives the direction and the older one vetoes a
//     reversal: a one-period spike (0, 10, 0) or dip (10, 0, 10) is noise
//     and changes nothing, a step (0, 0, 10) acts in the period it shows,
//     a ramp acts every period. Requiring both slopes beyond D (the other
//     reading of the seed) would never react to a step, the shape of a
//     tidal burst. Until three samples exist the budget stays at Min,
//     where it starts. The budget is a float, rounded when handed out.
//  2. Emptiness, in polling mode. The period is empty when no wait hit in
//     it and polling was tried: a wait missed in it, or a wait was in
//     progress at its end (still polling, or asleep after missing). A
//     period nobody waited in (the consumer was busy elsewhere) is not
//     empty. Two empty periods in a row switch to event mode: Budget
//     returns 0, the waiter arms and sleeps at once.
//
// In event mode the trend rule goes on adjusting the polling budget, and
// the first wait observed with events > 0 (a doorbell wake, or data found
// by the re-check after arming) switches back to polling at that budget:
// the last polling budget, not Min, so the next burst of a tidal load
// polls at its old rate at once; when traffic fell the fall rule has
// already shrunk it (the wait right after the switch is granted Max, rule
// 5 below). A wait that ends without an event (deadline, error) leaves
// event mode on.
//
// Wait feedback. The trend rule alone cannot serve request/response
// traffic: a ping-pong is steady, so the trend never raises the budget,
// each wait sleeps and each message pays a cross-core wakeup (25-30 us
// here, about 100 us through the shim's kernel sleep), while a poll of
// a few microseconds would have caught the reply. And two sleeping ends
// keep each other's gaps long: a waiter only sees short gaps once both
// poll. So each finished wait, in polling mode, also adjusts the budget:
//
//  3. A hit that used more than budget/Alpha polls raises the budget to
//     Alpha times its polls (clamped): the budget keeps a margin over the
//     gaps it catches.
//  4. A wait that polled and then slept or gave up multiplies the budget
//     by Beta (clamped): polling that finds nothing shrinks.
//  5. A wait woken by an event (it slept, or in event mode) grants the
//     next wait a budget of Max: the reply to what just arrived is
//     likely to come within one peer wakeup, and polling through it lets
//     both ends leave the sleeping ping-pong. A granted wait that hits
//     feeds rule 3 (the budget then covers the gap); one that misses
//     doubles the number of wakes between grants (up to
//     adaptiveGrantBackoff), so sparse traffic pays a grant's polling
//     rarely; a granted hit grants every wake again.
//
// The trend rule and the emptiness rule are unchanged by the feedback.
// Under CPU contention a waiter descheduled mid-poll for two periods
// finds them empty and enters event mode; its next event (often the data
// already there at its first check) leaves it, so such switches cost no
// sleep.
type AdaptivePolicy struct {
	p        PollParams
	budget   float64 // polling budget, in [Min, Max]
	event    bool    // event mode: Budget returns 0
	switches uint64  // mode changes, both ways
	emptyRun int     // consecutive empty periods, in polling mode

	grantNext  bool // the next polling wait gets budget Max (rule 5)
	grantsOut  int  // granted waits between Budget and Observe
	grantEvery int  // a grant every grantEvery-th wake, 1..adaptiveGrantBackoff
	grantSkip  int  // wakes left before the next grant

	started   bool
	periodEnd time.Time
	events    int // of the current period
	hits      int
	misses    int
	inflight  int        // waits between Budget and Observe
	samples   [3]float64 // event counts of the last closed periods, newest last
	nsamples  int
}

var (
	_ WaitPolicy   = (*AdaptivePolicy)(nil)
	_ ModeSwitcher = (*AdaptivePolicy)(nil)
)

// adaptiveCatchUp is how many elapsed periods one call closes one by one.
// After the first close and three idle ones the samples are all zero (the
// trend is flat) and the empty run has either switched to event mode or
// been reset, so further idle periods change nothing and are skipped.
const adaptiveCatchUp = 4

// adaptiveGrantBackoff bounds the wakes between two grants (rule 5) once
// grants keep missing: traffic whose gaps outlast Max polls pays Max
// polls on at most one wake in this many.
const adaptiveGrantBackoff = 64

// NewAdaptivePolicy returns an adaptive policy in polling mode with budget
// p.Min, or the error of p.Validate.
func NewAdaptivePolicy(p PollParams) (*AdaptivePolicy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &AdaptivePolicy{p: p, budget: float64(p.Min), grantEvery: 1}, nil
}

// Budget returns 0 in event mode, Max to a granted wait (rule 5), else
// the polling budget.
func (a *AdaptivePolicy) Budget(now time.Time) int {
	a.advance(now)
	a.inflight++
	if a.event {
		return 0
	}
	if a.grantNext {
		a.grantNext = false
		a.grantsOut++
		return a.p.Max
	}
	return int(math.Round(a.budget))
}

// Observe accounts one finished wait in the period that holds now.
func (a *AdaptivePolicy) Observe(now time.Time, polls int, hit bool, events int) {
	a.advance(now)
	if a.inflight > 0 {
		a.inflight--
	}
	granted := a.grantsOut > 0
	if granted {
		a.grantsOut--
	}
	if events > 0 {
		a.events += events
	}
	switch {
	case a.event:
		if events > 0 {
			a.setEvent(false)
			a.woken()
		}
	case hit:
		a.hits++
		if p := float64(polls); p*a.p.Alpha > a.budget {
			a.budget = a.clamp(p * a.p.Alpha)
		}
		if granted {
			a.grantEvery = 1
		}
	default:
		if polls > 0 {
			a.misses++
			a.budget = a.clamp(a.budget * a.p.Beta)
			if granted {
				a.grantEvery = min(2*a.grantEvery, adaptiveGrantBackoff)
			}
		}
		if events > 0 {
			a.woken()
		}
	}
}

// woken applies rule 5 to a wait that an event ended after a sleep.
func (a *AdaptivePolicy) woken() {
	if a.grantSkip > 0 {
		a.grantSkip--
		return
	}
	a.grantNext = true
	a.grantSkip = a.grantEvery - 1
}

func (a *AdaptivePolicy) clamp(b float64) float64 {
	return min(max(b, float64(a.p.Min)), float64(a.p.Max))
}

// ModeSwitches returns how many times the policy entered or left event
// mode.
func (a *AdaptivePolicy) ModeSwitches() uint64 { return a.switches }

// advance closes every period that ended at or before now. A clock that
// goes backwards leaves the current period open.
func (a *AdaptivePolicy) advance(now time.Time) {
	if !a.started {
		a.started = true
		a.periodEnd = now.Add(a.p.Period)
		return
	}
	for closed := 0; !now.Before(a.periodEnd); closed++ {
		if closed == adaptiveCatchUp {
			skip := now.Sub(a.periodEnd)/a.p.Period + 1
			a.periodEnd = a.periodEnd.Add(skip * a.p.Period)
			return
		}
		a.closePeriod()
		a.periodEnd = a.periodEnd.Add(a.p.Period)
	}
}

func (a *AdaptivePolicy) closePeriod() {
	a.samples = [3]float64{a.samples[1], a.samples[2], float64(a.events)}
	if a.nsamples < 3 {
		a.nsamples++
	}
	if a.nsamples == 3 {
		a.applyTrend()
	}
	if !a.event {
		empty := a.hits == 0 && (a.misses > 0 || a.inflight > 0)
		switch {
		case !empty:
			a.emptyRun = 0
		case a.emptyRun == 1:
			a.setEvent(true)
		default:
			a.emptyRun = 1
		}
	}
	a.events, a.hits, a.misses = 0, 0, 0
}

// applyTrend is step 1 of the rule in the type's comment.
func (a *AdaptivePolicy) applyTrend() {
	d1 := a.samples[1] - a.samples[0]
	d2 := a.samples[2] - a.samples[1]
	D := a.p.Delta
	switch {
	case d2 > D && d1 >= -D:
		a.budget *= a.p.Alpha
	case d2 < -D && d1 <= D:
		a.budget *= a.p.Beta
	default:
		return
	}
	a.budget = a.clamp(a.budget)
}

func (a *AdaptivePolicy) setEvent(on bool) {
	if a.event != on {
		a.event = on
		a.switches++
	}
	a.emptyRun = 0
}
