package wait

import "time"

// Doorbell lets a waiting side sleep until its peer makes progress. The
// peer rings only while the doorbell is armed, so a waiter that finds its
// condition by polling costs the peer nothing. Implementations live with
// the channel (a flag in shared memory plus a provider notification).
type Doorbell interface {
	// Arm asks the peer to ring at its next event (data written, block
	// freed, close). After Arm the caller checks its condition once more
	// and then calls Sleep or Disarm: arm, check, sleep loses no wakeup.
	Arm() error
	// Sleep blocks until the doorbell rings or the deadline passes; a zero
	// deadline means none. A ring that arrived after Arm returns at once.
	// It returns nil when rung, os.ErrDeadlineExceeded at the deadline, or
	// the error that ended the channel (peer gone, closed). The doorbell is
	// disarmed when Sleep returns.
	Sleep(deadline time.Time) error
	// Disarm withdraws an Arm whose Sleep will not happen. Cheap when not
	// armed.
	Disarm()
}

// WaitPolicy decides how many times a waiter polls before it arms its
// doorbell and sleeps (seed 002). Implementations: busy, event, hybrid
// (fixed spin, then sleep) and adaptive (traffic-driven budget). A policy
// belongs to one waiter and is not safe for concurrent use.
type WaitPolicy interface {
	// Budget returns how many polls to make before sleeping; a negative
	// value means never sleep (poll until ready or the deadline). Each
	// Budget call is followed by exactly one Observe of the same wait, so
	// a policy may count the waits in progress between the two.
	Budget(now time.Time) int
	// Observe reports one finished wait: how many polls it made, whether
	// it found the condition without sleeping (hit: by polling or by the
	// check after Arm) or had to sleep or gave up, and how many events
	// (messages, blocks) it consumed, the traffic sample.
	Observe(now time.Time, polls int, hit bool, events int)
}
