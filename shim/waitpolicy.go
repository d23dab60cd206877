package shim

import (
	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/shim/config"
)

// waitPolicyFactory turns the SDPSHIM_POLL* settings into a factory of
// wait policies, one per waiter. Settings that config accepts but the
// waiter does not (a zero minimum budget) are raised to the nearest valid
// value; should the result still be refused, the defaults are used and
// the problem logged once.
func waitPolicyFactory(c config.Config, log *logrus.Logger) func() wait.WaitPolicy {
	pp := wait.PollParams{
		Min: max(c.PollMin, 1), Max: max(c.PollMax, c.PollMin, 1),
		Alpha: c.PollAlpha, Beta: c.PollBeta, Delta: c.PollDelta,
		Period: c.PollPeriod, Spin: max(c.PollSpin, 1),
	}
	mode := string(c.Poll)
	if _, err := wait.NewWaitPolicy(mode, pp); err != nil {
		log.WithError(err).Warn("SDPSHIM_POLL settings refused by the waiter; using its defaults")
		mode, pp = wait.WaitModeAdaptive, wait.DefaultPollParams()
	}
	return func() wait.WaitPolicy {
		w, err := wait.NewWaitPolicy(mode, pp)
		if err != nil {
			panic(err) // checked above
		}
		return w
	}
}
