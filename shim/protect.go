package shim

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// Protected fds. The Go runtime owns two descriptors once its network
// poller starts (the epoll fd and the eventfd that breaks its waits): a
// host that closes them (close_range, a closing loop) would crash the
// runtime, so they are PROTECTED in the interposer's table. The runtime
// gives no way to name them; protectRuntime starts the poller (any timer
// does) and protects the eventpoll and eventfd descriptors that appeared
// meanwhile. So that a host thread's own new descriptors are never taken
// for the runtime's, only those two kinds count.
//
// The shim's own long-lived descriptors are protected where they are made
// (eventfds of socket wakeups, the log file). The core reports every
// long-lived descriptor of a channel through fdhook.FDHook: the shm
// provider's (memfds of regions and control areas, eventfds, side-channel
// sockets, epoll sets, peers' memfds) and the transports' (doorbell and
// kick eventfds). protectProviderFDs marks each PROTECTED as it appears
// and gives it back just before the core closes it, so a host's
// close_range or closing loop leaves the channels intact.

// protectRuntime protects the runtime's poller descriptors. It runs
// first in Init, before anything that may open an os.File (which starts
// the poller too), and uses raw system calls for the same reason. The
// kernel gives a new descriptor the lowest free number, so the poller's
// two land among the numbers free before it started: those are noted
// with one poll(2) (POLLNVAL marks a number that is not open) and only
// the ones open afterwards are looked at. Reading /proc/self/fd instead
// cost two directory reads and a readlink per open descriptor, a sixth
// of a fork child's core start.
func protectRuntime(host Host) {
	free := closedFDs(runtimeFDs + hostSlack)
	time.Sleep(time.Nanosecond) // a timer: starts the runtime's poller
	for _, fd := range openOf(free) {
		if isRuntimeKind(fd) {
			host.SetFDState(fd, FDProtected)
		}
	}
}

// runtimeFDs is how many descriptors the poller opens; hostSlack how many
// a host thread may open meanwhile without pushing them past the numbers
// noted.
const (
	runtimeFDs = 2
	hostSlack  = 14
)

// closedFDs returns the n lowest descriptor numbers not open now, found
// by polling windows of numbers with no events (an fd that is not open
// answers POLLNVAL). A window is at most the soft RLIMIT_NOFILE, which
// poll(2) refuses to exceed, and no number at or past it can be handed
// out. A poll that fails returns what was found so far.
func closedFDs(n int) []int {
	limit := 1 << 20
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(limit) {
		limit = int(rl.Cur)
	}
	out := make([]int, 0, n)
	buf := make([]unix.PollFd, min(256, limit))
	for base := 0; len(out) < n && base < limit; base += len(buf) {
		fds := buf[:min(len(buf), limit-base)]
		for i := range fds {
			fds[i] = unix.PollFd{Fd: int32(base + i)}
		}
		if err := pollNow(fds); err != nil {
			return out
		}
		for i := range fds {
			if fds[i].Revents&unix.POLLNVAL != 0 && len(out) < n {
				out = append(out, base+i)
			}
		}
	}
	return out
}

// openOf returns the numbers of fds that are open now.
func openOf(fds []int) []int {
	p := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		p[i] = unix.PollFd{Fd: int32(fd)}
	}
	var out []int
	if err := pollNow(p); err != nil {
		return fds // let isRuntimeKind look at each
	}
	for i := range p {
		if p[i].Revents&unix.POLLNVAL == 0 {
			out = append(out, fds[i])
		}
	}
	return out
}

// pollNow polls fds without waiting, again when a signal interrupts it.
func pollNow(fds []unix.PollFd) error {
	for {
		_, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// isRuntimeKind reports whether fd is open and an eventpoll or eventfd
// descriptor: the two kinds the poller opens.
func isRuntimeKind(fd int) bool {
	var buf [32]byte
	k, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err != nil {
		return false
	}
	t := string(buf[:k])
	return t == "anon_inode:[eventpoll]" || t == "anon_inode:[eventfd]"
}

// protectProviderFDs has the core's channel descriptors protected for the
// life of the process (there is one Process). Init installs it before any
// channel exists.
func protectProviderFDs(host Host) {
	fdhook.SetFDHook(fdhook.FDHook{
		Opened:  func(fd int) { host.SetFDState(fd, FDProtected) },
		Closing: func(fd int) { host.SetFDState(fd, FDUnmanaged) },
	})
}

// protect marks fd as the core's.
func (p *Process) protect(fd int) {
	if fd >= 0 {
		p.host.SetFDState(fd, FDProtected)
	}
}

// unprotect gives fd back before the core closes it.
func (p *Process) unprotect(fd int) {
	if fd >= 0 {
		p.host.SetFDState(fd, FDUnmanaged)
	}
}
