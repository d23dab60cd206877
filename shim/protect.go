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
// the poller too), and reads /proc with raw system calls for the same
// reason.
func protectRuntime(host Host) {
	before := anonFDs()
	time.Sleep(time.Nanosecond) // a timer: starts the runtime's poller
	for fd, kind := range anonFDs() {
		if before[fd] != kind {
			host.SetFDState(fd, FDProtected)
		}
	}
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

// anonFDs lists the open eventpoll and eventfd descriptors of the process.
func anonFDs() map[int]string {
	out := map[int]string{}
	d, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out
	}
	defer unix.Close(d)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(d, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var buf [64]byte
		k, err := unix.Readlink("/proc/self/fd/"+n, buf[:])
		if err != nil {
			continue
		}
		if t := string(buf[:k]); t == "anon_inode:[eventpoll]" || t == "anon_inode:[eventfd]" {
			out[fd] = t
		}
	}
	return out
}
