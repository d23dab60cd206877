// Package cpupin puts threads on one CPU, for tests that need more threads
// wanting a CPU than there are cores: a wait that yields then loses the
// CPU to another thread, as a ping-pong beside a bulk stream does on a
// busy machine (preemption's starved mark, preload/c/direct.c).
package cpupin

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Set is one CPU of the process's affinity, and the whole affinity to go
// back to.
type Set struct {
	One, Allowed unix.CPUSet
	CPU          int // the number of the one CPU
}

// First returns the first CPU this process may run on.
func First() (Set, error) {
	var s Set
	if err := unix.SchedGetaffinity(0, &s.Allowed); err != nil {
		return s, err
	}
	for !s.Allowed.IsSet(s.CPU) {
		s.CPU++
	}
	s.One.Set(s.CPU)
	return s, nil
}

// Pin locks the calling goroutine to its thread and puts the thread on
// s's one CPU; Unpin undoes both. On an error the goroutine is locked
// still: call Unpin.
func (s Set) Pin() error {
	runtime.LockOSThread()
	return unix.SchedSetaffinity(0, &s.One)
}

// Unpin gives the calling thread the process's affinity back and unlocks
// the goroutine from it.
func (s Set) Unpin() {
	unix.SchedSetaffinity(0, &s.Allowed)
	runtime.UnlockOSThread()
}
