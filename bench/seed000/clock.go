package seed000

import (
	"time"

	"golang.org/x/sys/unix"
)

// The process's CLOCK_MONOTONIC, read through Go's vDSO clock: clockBase
// is a Go time whose monotonic reading is clockMono nanoseconds of
// CLOCK_MONOTONIC, to within a few tens of nanoseconds (the tightest of
// several bracketing reads).
var clockBase, clockMono = calibrateClock()

func calibrateClock() (time.Time, int64) {
	base := time.Now()
	best, mono := time.Duration(1<<62), int64(0)
	for i := 0; i < 32; i++ {
		a := time.Since(base)
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			panic("seed000: clock_gettime: " + err.Error())
		}
		b := time.Since(base)
		if b-a < best {
			best = b - a
			mono = ts.Nano() - int64(a+b)/2
		}
	}
	return base, mono
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds, comparable across the
// processes of one host.
func monoNow() int64 { return clockMono + int64(time.Since(clockBase)) }

// cpuNow returns the CPU time (user + system) this process used so far.
func cpuNow() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
