package seed000

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wire"
)

// The transport-level experiments poll without sleeping (the seed's
// busy-polling sides): a wait that lasts past its deadline is an error.

// spinCheck is how many polls pass between two deadline checks.
const spinCheck = 1 << 12

// A poll loop yields the CPU (sched_yield) every spinYield polls, as
// core's waiter does, so that the other side runs when both share one
// core: with two cores and other processes busy that happens often, and a
// pure spin then waits for the scheduler's tick. When nothing else is
// runnable a yield returns at once (about 0.65 us here).
const spinYield = 16

// yielder is the state of one poll loop's yielding.
type yielder struct{}

// poll is called at each poll n (from 1) of the loop.
func (yielder) poll(n int) {
	if n%spinYield == 0 {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// sendSpin polls TrySend until the block goes.
func sendSpin(t wire.Transport, h wire.BlockHeader, p []byte, deadline time.Time) error {
	var y yielder
	for n := 1; ; n++ {
		ok, err := t.TrySend(h, p)
		if err != nil || ok {
			return err
		}
		y.poll(n)
		if n%spinCheck == 0 && time.Now().After(deadline) {
			return fmt.Errorf("send: %w", os.ErrDeadlineExceeded)
		}
	}
}

// receiveSpin polls Receive until a block arrives.
func receiveSpin(t wire.Transport, deadline time.Time) (wire.Block, error) {
	var y yielder
	for n := 1; ; n++ {
		b, ok, err := t.Receive()
		if err != nil || ok {
			return b, err
		}
		y.poll(n)
		if n%spinCheck == 0 && time.Now().After(deadline) {
			return b, fmt.Errorf("receive: %w", os.ErrDeadlineExceeded)
		}
	}
}

// spinFor busy-waits d.
func spinFor(d time.Duration) {
	for end := monoNow() + int64(d); monoNow() < end; {
	}
}
