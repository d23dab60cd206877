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

// highMax is HighBase's ceiling (SDP_FD_HIGH_MAX in preload/c/core.c).
const highMax = 1024

// HighBase is where the core keeps its own descriptors: half the soft
// RLIMIT_NOFILE, at most highMax, at least 64; above what programs that
// size tables by their descriptors use (select's FD_SETSIZE), and low
// enough that the kernel's fd table, which every fork copies up to the
// highest open descriptor, stays small (preload/c/core.c's
// sdp_core_high_fd keeps the same rule for the interposer's own). Read at
// each call: the program may change its limit.
func HighBase() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur < 128 {
		return 64
	}
	return int(min(rl.Cur/2, highMax))
}
