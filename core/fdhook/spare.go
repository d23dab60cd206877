package fdhook

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The spare: one descriptor the core keeps open for the moment its
// process reaches its fd limit. A server of the core whose accept fails
// with EMFILE (the rendezvous, the statistics socket) gives the spare up,
// accepts one connection in its place, answers it, closes it, and takes
// the spare back (AtLimit): so a client of a process at its limit gets an
// answer (a refusal, a snapshot) at once rather than a timeout, as the
// program's own accept gets EMFILE at once. One spare per process.
var spare struct {
	mu sync.Mutex
	fd int // 0: none (not opened, or given up just now)
}

// OpenSpare opens the spare (once; later calls do nothing).
func OpenSpare() {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.fd <= 0 {
		spare.fd = openSpare()
	}
}

// openSpare opens /dev/null among the core's high numbers (HighBase), or
// anywhere when it cannot move it; 0 when it cannot open it.
func openSpare() int {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	if hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, HighBase()); err == nil {
		unix.Close(fd)
		fd = hi
	}
	NoteFDs(fd)
	return fd
}

// AtLimit runs f with the spare's number free: f accepts one connection
// and finishes with it (closes it) before returning. It reports whether
// there was a spare to give up; without one it does not run f. Calls
// are serialised.
func AtLimit(f func()) bool {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.fd <= 0 {
		return false
	}
	CloseFD(spare.fd)
	spare.fd = 0
	f()
	spare.fd = openSpare()
	return true
}

// HighBase is where the core keeps its own descriptors: half the soft
// RLIMIT_NOFILE, at most 65536, at least 64, well above what programs use
// (they size tables by their descriptors: an event loop's, select's
// FD_SETSIZE). Read at each call: the program may change its limit.
func HighBase() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur < 128 {
		return 64
	}
	return int(min(rl.Cur/2, 1<<16))
}
