package wait

import (
	"slices"
	"testing"
	"time"
)

// Adaptive policy tests run on a fake clock: periodAt(k) is k periods
// after fakeEpoch.

const testPeriod = time.Millisecond

var fakeEpoch = time.Unix(1_700_000_000, 0)

func periodAt(periods float64) time.Time {
	return fakeEpoch.Add(time.Duration(periods * float64(testPeriod)))
}

func testAdaptive(t *testing.T, budget float64) *AdaptivePolicy {
	t.Helper()
	p := DefaultPollParams()
	p.Min, p.Max, p.Alpha, p.Beta, p.Delta, p.Period = 10, 160, 2, 0.5, 4, testPeriod
	a, err := NewAdaptivePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	a.budget = budget
	hitWait(a, 0, 0) // starts the clock: period k is [periodAt(k), periodAt(k+1))
	return a
}

// observeWait reports one whole wait (Budget, then Observe) at now.
func observeWait(a *AdaptivePolicy, now time.Time, polls int, hit bool, events int) int {
	b := a.Budget(now)
	a.Observe(now, polls, hit, events)
	return b
}

func hitWait(a *AdaptivePolicy, period float64, events int) int {
	return observeWait(a, periodAt(period), 5, true, events)
}

func missWait(a *AdaptivePolicy, period float64, events int) int {
	return observeWait(a, periodAt(period), 5, false, events)
}

func TestAdaptivePolicyTrend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   float64
		samples []int // events of periods 0, 1, ...
		want    float64
	}{
		{"one sample", 40, []int{100}, 40},
		{"two samples, no trend yet", 40, []int{0, 100}, 40},
		{"rise on a step", 40, []int{0, 0, 10}, 80},
		{"rise on a ramp", 40, []int{0, 5, 10}, 80},
		{"rise with older slope at -D", 40, []int{4, 0, 10}, 80},
		{"rise from Min at start", 10, []int{0, 0, 10}, 20},
		{"dip is noise", 40, []int{10, 0, 10}, 40},
		{"fall on a step", 40, []int{10, 10, 0}, 20},
		{"fall on a ramp", 40, []int{20, 10, 0}, 20},
		{"fall with older slope at +D", 40, []int{6, 10, 0}, 20},
		{"spike is noise", 40, []int{0, 10, 0}, 40},
		{"flat", 40, []int{7, 7, 7}, 40},
		{"rise of exactly D is flat", 40, []int{10, 14, 18}, 40},
		{"fall of exactly D is flat", 40, []int{18, 14, 10}, 40},
		{"just beyond D rises", 40, []int{10, 10, 15}, 80},
		{"clamp at Max", 120, []int{0, 0, 10}, 160},
		{"stays at Max", 160, []int{0, 10, 20}, 160},
		{"clamp at Min", 15, []int{10, 10, 0}, 10},
		{"stays at Min", 10, []int{30, 20, 10}, 10},
		{"window slides: flat, then rise", 40, []int{100, 0, 0, 10}, 80},
		{"rise then fall", 40, []int{0, 0, 10, 10, 0}, 40},
		{"ramp twice", 40, []int{0, 10, 20, 30}, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAdaptive(t, tc.start)
			for k, s := range tc.samples {
				hitWait(a, float64(k)+0.5, s)
			}
			// The first call of the next period closes the last sample.
			got := hitWait(a, float64(len(tc.samples)), 0)
			if float64(got) != tc.want || a.budget != tc.want {
				t.Errorf("budget = %d (%v), want %v", got, a.budget, tc.want)
			}
			if a.ModeSwitches() != 0 {
				t.Errorf("%d mode switches with hits in every period", a.ModeSwitches())
			}
		})
	}
}

func TestAdaptivePolicyDeltaZero(t *testing.T) {
	a := testAdaptive(t, 40)
	a.p.Delta = 0
	for k, s := range []int{5, 5, 6} {
		hitWait(a, float64(k)+0.5, s)
	}
	if got := hitWait(a, 3, 0); got != 80 {
		t.Errorf("budget = %d, want 80: any rise counts when D = 0", got)
	}
}

func TestAdaptivePolicyBudgetRounds(t *testing.T) {
	a := testAdaptive(t, 10)
	a.p.Alpha = 1.25
	for k, s := range []int{0, 0, 10} {
		hitWait(a, float64(k)+0.5, s)
	}
	if got := hitWait(a, 3, 0); got != 13 { // 12.5 rounds half away from zero
		t.Errorf("budget = %d, want 13", got)
	}
}

// The seed's emptiness rule and the way back from event mode. Misses
// here are waits that polled and gave up without an event (deadline), so
// that no grant (rule 5) interferes; each shrinks the budget by Beta
// (rule 4): 40, 20, 10 = Min.
func TestAdaptivePolicyEventMode(t *testing.T) {
	type step struct {
		period float64
		kind   string // hit, miss (polled, no event), wake (polled, slept, event), budget (Budget only), observe (Observe only, polled, not a hit)
		events int
	}
	for _, tc := range []struct {
		name     string
		steps    []step
		at       float64 // then Budget at this period
		want     int
		switches uint64
	}{
		{"one empty period", []step{{1.5, "miss", 0}}, 2, 20, 0},
		{"two empty periods", []step{{1.5, "miss", 0}, {2.5, "miss", 0}}, 3, 0, 1},
		{"two empty periods, many misses", []step{{1.2, "miss", 0}, {1.7, "miss", 0}, {2.1, "miss", 0}, {2.9, "miss", 0}}, 3, 0, 1},
		{"not yet: second period still open", []step{{1.5, "miss", 0}, {2.5, "miss", 0}}, 2.99, 10, 0},
		{"a hit breaks the run", []step{{1.5, "miss", 0}, {2.2, "miss", 0}, {2.5, "hit", 1}, {3.5, "miss", 0}}, 4, 10, 0},
		{"an idle period breaks the run", []step{{1.5, "miss", 0}, {3.5, "miss", 0}}, 4, 10, 0},
		{"empty run restarts after a break", []step{{1.5, "miss", 0}, {2.5, "hit", 1}, {3.5, "miss", 0}, {4.5, "miss", 0}}, 5, 0, 1},
		{"waits that slept are empty too", []step{{1.5, "wake", 1}, {2.5, "miss", 0}}, 3, 0, 1},
		// A waiter that missed and sleeps keeps the periods empty.
		{"asleep through two periods", []step{{0.5, "budget", 0}}, 3, 0, 1},
		{"asleep through one period", []step{{0.5, "budget", 0}}, 2, 40, 0},
		// Back to polling on the first event, with a grant (rule 5).
		{"event wakes polling", []step{{1.5, "miss", 0}, {2.5, "miss", 0}, {3.5, "wake", 1}}, 4, 160, 2},
		{"hit after arming is an event", []step{{1.5, "miss", 0}, {2.5, "miss", 0}, {3.5, "hit", 1}}, 4, 160, 2},
		{"deadline keeps event mode", []step{{1.5, "miss", 0}, {2.5, "miss", 0}, {3.5, "miss", 0}}, 4, 0, 1},
		{"woken after sleeping through two periods", []step{{0.5, "budget", 0}, {3.5, "observe", 1}}, 4, 160, 2},
		{"deadline after sleeping through two periods", []step{{0.5, "budget", 0}, {3.5, "observe", 0}}, 4, 0, 1},
		{"event mode again after two more empty periods", []step{{1.5, "miss", 0}, {2.5, "miss", 0}, {3.5, "wake", 1}, {4.5, "miss", 0}, {5.5, "miss", 0}}, 6, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAdaptive(t, 40)
			for _, s := range tc.steps {
				now := periodAt(s.period)
				switch s.kind {
				case "hit":
					hitWait(a, s.period, s.events)
				case "miss", "wake":
					missWait(a, s.period, s.events)
				case "budget":
					a.Budget(now)
				case "observe":
					a.Observe(now, 5, false, s.events)
				}
			}
			if got := a.Budget(periodAt(tc.at)); got != tc.want {
				t.Errorf("Budget at period %v = %d, want %d", tc.at, got, tc.want)
			}
			if got := a.ModeSwitches(); got != tc.switches {
				t.Errorf("ModeSwitches = %d, want %d", got, tc.switches)
			}
		})
	}
}

// The trend goes on in event mode: the budget polling resumes with has
// shrunk when traffic fell. One wait sleeps through the periods (they are
// empty), another reports events (woken, no polls).
func TestAdaptivePolicyTrendInEventMode(t *testing.T) {
	a := testAdaptive(t, 40)
	a.Budget(periodAt(0.5))                     // asleep
	observeWait(a, periodAt(1.5), 0, false, 10) // woken elsewhere (Waiter.Woken)
	observeWait(a, periodAt(2.5), 0, false, 10) // samples 0, 10, 10: flat; two empty periods
	if got := a.Budget(periodAt(3.5)); got != 0 {
		t.Fatalf("Budget = %d, want event mode", got)
	}
	a.Observe(periodAt(3.5), 1, false, 0) // deadline: period 3 carries no event
	a.Observe(periodAt(3.6), 1, false, 0) // the sleeper of period 0 gives up
	if got := a.Budget(periodAt(4.5)); got != 0 {
		t.Fatalf("Budget = %d, want event mode", got) // samples 10, 10, 0: fall
	}
	a.Observe(periodAt(4.5), 1, false, 1) // woken: back to polling, granted
	if got := observeWait(a, periodAt(4.6), 5, true, 1); got != 160 {
		t.Errorf("Budget = %d, want the grant, Max", got)
	}
	if got := a.Budget(periodAt(4.7)); got != 20 {
		t.Errorf("Budget = %d, want 20 (40 * Beta)", got)
	}
	a.Observe(periodAt(4.7), 5, true, 1)
}

// Rules 3 and 4: each wait in polling mode adjusts the budget.
func TestAdaptivePolicyFeedback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		start  float64
		polls  int
		hit    bool
		events int
		want   float64
	}{
		{"hit late in the budget grows it", 40, 30, true, 1, 60},
		{"hit at budget/Alpha leaves it", 40, 20, true, 1, 40},
		{"early hit leaves it", 40, 3, true, 1, 40},
		{"hit beyond the budget (granted) grows it", 40, 120, true, 1, 160},
		{"growth clamps at Max", 100, 90, true, 1, 160},
		{"miss shrinks", 40, 40, false, 0, 20},
		{"sleep then event shrinks", 40, 40, false, 1, 20},
		{"shrink clamps at Min", 15, 15, false, 0, 10},
		{"woken without polls leaves it", 40, 0, false, 1, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAdaptive(t, tc.start)
			observeWait(a, periodAt(0.5), tc.polls, tc.hit, tc.events)
			if a.budget != tc.want {
				t.Errorf("budget = %v, want %v", a.budget, tc.want)
			}
			if a.ModeSwitches() != 0 {
				t.Errorf("%d mode switches", a.ModeSwitches())
			}
		})
	}
}

// Rule 5: a wake grants Max to the next wait only.
func TestAdaptivePolicyGrant(t *testing.T) {
	a := testAdaptive(t, 40)
	if got := observeWait(a, periodAt(0.1), 40, false, 1); got != 40 { // slept, woken: B 20
		t.Fatalf("Budget = %d, want 40", got)
	}
	if got := observeWait(a, periodAt(0.2), 70, true, 1); got != 160 {
		t.Fatalf("Budget after a wake = %d, want Max", got)
	}
	if got := a.Budget(periodAt(0.3)); got != 140 { // the granted hit after 70 polls: 2*70
		t.Errorf("Budget after the granted hit = %d, want 140", got)
	}
	a.Observe(periodAt(0.3), 5, true, 1)
	// Woken without polls (the shim's kernel sleep): a grant too.
	a.Observe(periodAt(0.4), 0, false, 1)
	if got := a.Budget(periodAt(0.5)); got != 160 {
		t.Errorf("Budget after Woken = %d, want Max", got)
	}
	a.Observe(periodAt(0.5), 3, true, 1)
	if got := a.Budget(periodAt(0.6)); got != 140 {
		t.Errorf("Budget = %d, want 140: an early hit keeps it", got)
	}
	a.Observe(periodAt(0.6), 3, true, 1)
}

// Rule 5's back-off: grants that keep missing come on wakes 1, 2, 4, 8,
// ... then every adaptiveGrantBackoff-th wake; a granted hit grants every
// wake again.
func TestAdaptivePolicyGrantBackoff(t *testing.T) {
	a := testAdaptive(t, 40)
	a.p.Period = time.Hour // one period: the emptiness rule stays out
	now := periodAt(0.5)
	var granted []int
	for wake := 1; wake <= 260; wake++ {
		a.Budget(now)
		a.Observe(now, 0, false, 1) // woken
		if b := a.Budget(now); b == 160 {
			granted = append(granted, wake)
		}
		a.Observe(now, 10, false, 0) // the next wait polls its budget and gives up
	}
	want := []int{1, 2, 4, 8, 16, 32, 64, 128, 192, 256}
	if !slices.Equal(granted, want) {
		t.Errorf("grants on wakes %v, want %v", granted, want)
	}
	// A granted wait that hits ends the back-off.
	for a.grantSkip > 0 {
		a.Observe(now, 0, false, 1)
	}
	a.Observe(now, 0, false, 1)
	if b := observeWait(a, now, 100, true, 1); b != 160 {
		t.Fatalf("Budget = %d, want a grant", b)
	}
	for i := range 3 {
		a.Observe(now, 0, false, 1)
		if b := observeWait(a, now, 10, false, 1); b != 160 {
			t.Errorf("wake %d after a granted hit: Budget = %d, want a grant", i, b)
		}
		observeWait(a, now, 100, true, 1)
	}
}

// Request/response: from the sleeping state one grant is enough for a
// waiter to poll through every later gap; when the traffic stops, one
// budget of polling and the emptiness rule bring it to event mode.
func TestAdaptivePolicyPingPong(t *testing.T) {
	a := testAdaptive(t, 10)
	now := 0.5
	tick := func() time.Time { now += 0.001; return periodAt(now) }
	if b := observeWait(a, tick(), 10, false, 1); b != 10 { // asleep: the reply took a wakeup
		t.Fatalf("Budget = %d, want Min", b)
	}
	const gap = 45 // polls between two messages while the peer polls
	for i := range 5000 {
		b := observeWait(a, tick(), gap, true, 1)
		if i > 0 && b < gap*2 {
			t.Fatalf("wait %d: Budget %d, want at least %d", i, b, gap*2)
		}
	}
	if a.ModeSwitches() != 0 {
		t.Errorf("%d mode switches while messages flow", a.ModeSwitches())
	}
	end := now
	a.Budget(tick()) // the last wait polls its budget and sleeps: idle from here
	if b := a.Budget(periodAt(end + 3)); b != 0 {
		t.Errorf("Budget = %d after an idle time, want event mode", b)
	}
}

func TestAdaptivePolicyPeriodBoundary(t *testing.T) {
	a := testAdaptive(t, 40)
	hitWait(a, 1, 10) // exactly at the end of period 0: counts in period 1
	if a.nsamples != 1 || a.samples[2] != 0 || a.events != 10 {
		t.Fatalf("after a wait at periodAt(1): samples %v (%d), open events %d; want [.. 0] (1), 10", a.samples, a.nsamples, a.events)
	}
	observeWait(a, periodAt(2).Add(-time.Nanosecond), 5, true, 1) // last instant of period 1
	if a.nsamples != 1 || a.events != 11 {
		t.Fatalf("period 1 closed early: samples %v (%d), open events %d", a.samples, a.nsamples, a.events)
	}
	a.Budget(periodAt(2))
	if a.nsamples != 2 || a.samples[2] != 11 || a.events != 0 {
		t.Errorf("periodAt(2): samples %v (%d), open events %d; want [.. 11] (2), 0", a.samples, a.nsamples, a.events)
	}
	a.Observe(periodAt(2), 5, true, 0)
}

func TestAdaptivePolicyClockBackwards(t *testing.T) {
	a := testAdaptive(t, 40)
	hitWait(a, 2.5, 3)
	hitWait(a, 1.5, 4) // earlier than the open period: counted in it
	if a.nsamples != 2 || a.events != 7 {
		t.Errorf("samples %d, open events %d; want 2, 7", a.nsamples, a.events)
	}
}

// A call after a long idle time equals one call per elapsed period.
func TestAdaptivePolicyIdleCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		asleep bool // a wait in progress through the idle time
	}{{"nobody waiting", false}, {"waiter asleep", true}} {
		t.Run(tc.name, func(t *testing.T) {
			history := func(a *AdaptivePolicy) {
				hitWait(a, 0.5, 30)
				hitWait(a, 1.5, 30)
				missWait(a, 2.5, 40)
				if tc.asleep {
					a.Budget(periodAt(2.7))
				}
			}
			jump, step := testAdaptive(t, 40), testAdaptive(t, 40)
			history(jump)
			history(step)
			for k := 3; k <= 1000; k++ {
				step.advance(periodAt(float64(k)))
			}
			step.advance(periodAt(1000.5))
			jump.advance(periodAt(1000.5))
			if *jump != *step {
				t.Errorf("after a jump:\n %+v\nstep by step:\n %+v", *jump, *step)
			}
			if want := tc.asleep; jump.event != want {
				t.Errorf("event mode = %v, want %v", jump.event, want)
			}
		})
	}
}
