package wait

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestWaitPolicyDefaultsValid(t *testing.T) {
	if err := DefaultPollParams().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, mode := range append(WaitModes(), "") {
		if _, err := NewWaitPolicy(mode, DefaultPollParams()); err != nil {
			t.Errorf("NewWaitPolicy(%q, defaults): %v", mode, err)
		}
	}
}

func TestWaitPolicyParamsValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*PollParams)
	}{
		{"Min", func(p *PollParams) { p.Min = 0 }},
		{"Min", func(p *PollParams) { p.Min = -3 }},
		{"Min", func(p *PollParams) { p.Min, p.Max = MaxPollBudget+1, MaxPollBudget+1 }},
		{"Max", func(p *PollParams) { p.Min, p.Max = 100, 99 }},
		{"Max", func(p *PollParams) { p.Max = MaxPollBudget + 1 }},
		{"Alpha", func(p *PollParams) { p.Alpha = 1 }},
		{"Alpha", func(p *PollParams) { p.Alpha = 0.5 }},
		{"Alpha", func(p *PollParams) { p.Alpha = math.NaN() }},
		{"Alpha", func(p *PollParams) { p.Alpha = math.Inf(1) }},
		{"Beta", func(p *PollParams) { p.Beta = 0 }},
		{"Beta", func(p *PollParams) { p.Beta = 1 }},
		{"Beta", func(p *PollParams) { p.Beta = -0.5 }},
		{"Beta", func(p *PollParams) { p.Beta = math.NaN() }},
		{"Delta", func(p *PollParams) { p.Delta = -1 }},
		{"Delta", func(p *PollParams) { p.Delta = math.NaN() }},
		{"Delta", func(p *PollParams) { p.Delta = math.Inf(1) }},
		{"Period", func(p *PollParams) { p.Period = 0 }},
		{"Period", func(p *PollParams) { p.Period = MinPollPeriod - 1 }},
		{"Period", func(p *PollParams) { p.Period = MaxPollPeriod + 1 }},
		{"Spin", func(p *PollParams) { p.Spin = 0 }},
		{"Spin", func(p *PollParams) { p.Spin = MaxPollBudget + 1 }},
	} {
		p := DefaultPollParams()
		tc.edit(&p)
		err := p.Validate()
		var pe *PollParamError
		if !errors.As(err, &pe) || pe.Field != tc.field || !errors.Is(err, ErrInvalidPollParams) {
			t.Errorf("%+v: Validate() = %v, want a PollParamError for %s", p, err, tc.field)
			continue
		}
		for _, mode := range WaitModes() { // every mode validates every field
			if _, err := NewWaitPolicy(mode, p); !errors.Is(err, ErrInvalidPollParams) {
				t.Errorf("NewWaitPolicy(%q, bad %s) = %v", mode, tc.field, err)
			}
		}
	}
}

func TestWaitPolicyParamsBounds(t *testing.T) {
	p := PollParams{Min: 1, Max: 1, Alpha: 1.0001, Beta: 0.9999, Delta: 0, Period: MinPollPeriod, Spin: 1}
	if err := p.Validate(); err != nil {
		t.Errorf("lower bounds: %v", err)
	}
	p = PollParams{Min: MaxPollBudget, Max: MaxPollBudget, Alpha: 1e6, Beta: 1e-6, Delta: 1e9, Period: MaxPollPeriod, Spin: MaxPollBudget}
	if err := p.Validate(); err != nil {
		t.Errorf("upper bounds: %v", err)
	}
}

func TestWaitPolicyModes(t *testing.T) {
	p := DefaultPollParams()
	p.Spin = 77
	now := time.Unix(100, 0)
	for _, tc := range []struct {
		mode string
		want int
	}{
		{WaitModeBusy, -1},
		{WaitModeEvent, 0},
		{WaitModeHybrid, 77},
		{WaitModeAdaptive, p.Min},
		{"", p.Min},
	} {
		pol, err := NewWaitPolicy(tc.mode, p)
		if err != nil {
			t.Fatalf("%q: %v", tc.mode, err)
		}
		if got := pol.Budget(now); got != tc.want {
			t.Errorf("%q: first Budget = %d, want %d", tc.mode, got, tc.want)
		}
	}
	_, err := NewWaitPolicy("spin", p)
	var pe *PollParamError
	if !errors.As(err, &pe) || pe.Field != "Mode" {
		t.Errorf("unknown mode: err = %v, want a Mode PollParamError", err)
	}
}

// The fixed policies ignore every observation.
func TestWaitPolicyFixedIgnoreTraffic(t *testing.T) {
	for _, tc := range []struct {
		pol  WaitPolicy
		want int
	}{
		{BusyPolicy{}, -1},
		{EventPolicy{}, 0},
		{HybridPolicy{Spin: 300}, 300},
	} {
		t0 := time.Unix(100, 0)
		for i := range 1000 {
			now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
			if got := tc.pol.Budget(now); got != tc.want {
				t.Fatalf("%T: Budget = %d at step %d, want %d", tc.pol, got, i, tc.want)
			}
			tc.pol.Observe(now, i%50, i%3 == 0, i%7) // rising, hits, misses, idle
		}
	}
}
