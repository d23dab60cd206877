package shim

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestMonoNS checks that monoNS is CLOCK_MONOTONIC, the clock another
// process compares a post's times with: between two readings of the
// kernel's clock.
func TestMonoNS(t *testing.T) {
	var a, b unix.Timespec
	for range 100 {
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		m := monoNS()
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if m < a.Nano() || m > b.Nano() {
			t.Fatalf("monoNS %d not between CLOCK_MONOTONIC's %d and %d", m, a.Nano(), b.Nano())
		}
	}
}
