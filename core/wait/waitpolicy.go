package wait

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Wait modes, the values of SDPSHIM_POLL. One file per policy:
// waitpolicy_busy.go, waitpolicy_event.go, waitpolicy_hybrid.go,
// waitpolicy_adaptive.go.
const (
	WaitModeAdaptive = "adaptive" // traffic-driven budget (seed 002), the default
	WaitModeBusy     = "busy"     // poll until ready, never sleep
	WaitModeEvent    = "event"    // never poll: arm and sleep at once
	WaitModeHybrid   = "hybrid"   // fixed spin, then sleep (NAPI-style baseline)
)

// WaitModes lists the accepted wait modes, default first.
func WaitModes() []string {
	return []string{WaitModeAdaptive, WaitModeBusy, WaitModeEvent, WaitModeHybrid}
}

// MaxPollBudget bounds every budget parameter (about 70 ms of polling on
// the development VM), so that a typo cannot make a waiter spin for ever.
const MaxPollBudget = 1 << 20

// PollParams are the knobs of the wait policies. The config layer starts
// from DefaultPollParams and overrides what the environment sets; Validate
// checks every field whatever the mode, so a bad knob is reported even when
// its mode is not selected. Budgets count polls (one condition check plus
// a CPU pause, about 30 ns here; about 70 ns with the waiter's periodic
// sched_yield on this VM); the defaults are sized against a cross-core
// wakeup of 25-30 us.
type PollParams struct {
	Min    int           // adaptive: smallest polling budget (SDPSHIM_POLL_MIN), >= 1
	Max    int           // adaptive: largest polling budget (SDPSHIM_POLL_MAX), >= Min
	Alpha  float64       // adaptive: budget factor on rising traffic (SDPSHIM_POLL_ALPHA), > 1
	Beta   float64       // adaptive: budget factor on falling traffic (SDPSHIM_POLL_BETA), in (0, 1)
	Delta  float64       // adaptive: slope threshold D in events per period (SDPSHIM_POLL_DELTA), >= 0
	Period time.Duration // adaptive: traffic sampling period, in [MinPollPeriod, MaxPollPeriod]
	Spin   int           // hybrid: polls before sleeping, >= 1
}

// Bounds of PollParams.Period.
const (
	MinPollPeriod = 10 * time.Microsecond
	MaxPollPeriod = 10 * time.Second
)

// DefaultPollParams returns the defaults, the same as SDPSHIM_POLL_*'s
// (shim/config): Min 16 polls (about 1 us, enough for a peer that answers
// from another core), Max 4096 (about 150-290 us: longer than a wakeup
// through the shim's kernel sleep, about 100 us here, so that a granted
// wait outlasts the peer's wakeup and a ping-pong leaves its sleeping
// state; see AdaptivePolicy, rule 5), Alpha 2, Beta 0.5, Delta 16 events
// per period (a change of 16 messages per millisecond counts as a trend,
// smaller changes are noise at the rates where polling pays), Period 1 ms
// (many waits per sample at the rates where polling pays, yet an idle
// waiter reaches event mode within 2-3 ms), Spin 256 (about 8-18 us,
// the classic spin-then-block break-even against one wakeup).
func DefaultPollParams() PollParams {
	return PollParams{
		Min:    16,
		Max:    4096,
		Alpha:  2,
		Beta:   0.5,
		Delta:  16,
		Period: time.Millisecond,
		Spin:   256,
	}
}

// ErrInvalidPollParams is matched (errors.Is) by every error of Validate
// and NewWaitPolicy.
var ErrInvalidPollParams = errors.New("invalid wait policy parameter")

// PollParamError names the rejected parameter, so that the config layer
// can name the environment variable it came from.
type PollParamError struct {
	Field string // PollParams field name, or "Mode"
	Value string // the rejected value
	Want  string // what is accepted
}

func (e *PollParamError) Error() string {
	return fmt.Sprintf("wait policy: %s = %s, want %s", e.Field, e.Value, e.Want)
}

// Is makes errors.Is(err, ErrInvalidPollParams) true.
func (e *PollParamError) Is(target error) bool { return target == ErrInvalidPollParams }

// Validate returns a *PollParamError for the first field (in declaration
// order) that is out of range, or nil.
func (p PollParams) Validate() error {
	bad := func(field, value, want string) error {
		return &PollParamError{Field: field, Value: value, Want: want}
	}
	itoa, ftoa := strconv.Itoa, func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	// Built only for an error: a connection makes two policies, each
	// validated.
	budget := func() string { return "an integer in [1, " + itoa(MaxPollBudget) + "]" }
	switch {
	case p.Min < 1 || p.Min > MaxPollBudget:
		return bad("Min", itoa(p.Min), budget())
	case p.Max < p.Min || p.Max > MaxPollBudget:
		return bad("Max", itoa(p.Max), "an integer in [Min="+itoa(p.Min)+", "+itoa(MaxPollBudget)+"]")
	case !(p.Alpha > 1) || math.IsInf(p.Alpha, 0):
		return bad("Alpha", ftoa(p.Alpha), "a finite number > 1")
	case !(p.Beta > 0 && p.Beta < 1):
		return bad("Beta", ftoa(p.Beta), "a number in (0, 1)")
	case !(p.Delta >= 0) || math.IsInf(p.Delta, 0):
		return bad("Delta", ftoa(p.Delta), "a finite number >= 0 (events per period)")
	case p.Period < MinPollPeriod || p.Period > MaxPollPeriod:
		return bad("Period", p.Period.String(), "a duration in ["+MinPollPeriod.String()+", "+MaxPollPeriod.String()+"]")
	case p.Spin < 1 || p.Spin > MaxPollBudget:
		return bad("Spin", itoa(p.Spin), budget()+" (use mode event for no spin)")
	}
	return nil
}

// NewWaitPolicy returns a fresh policy for one waiter: mode is one of
// WaitModes ("" means adaptive); p is validated whatever the mode.
func NewWaitPolicy(mode string, p PollParams) (WaitPolicy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	switch mode {
	case WaitModeAdaptive, "":
		return NewAdaptivePolicy(p)
	case WaitModeBusy:
		return BusyPolicy{}, nil
	case WaitModeEvent:
		return EventPolicy{}, nil
	case WaitModeHybrid:
		return HybridPolicy{Spin: p.Spin}, nil
	}
	return nil, &PollParamError{Field: "Mode", Value: strconv.Quote(mode), Want: "one of adaptive, busy, event, hybrid"}
}

// ModeSwitcher is implemented by policies that move between polling and
// event mode (adaptive). The waiter publishes the count in its stats.
type ModeSwitcher interface {
	// ModeSwitches returns how many times the policy changed mode.
	ModeSwitches() uint64
}
