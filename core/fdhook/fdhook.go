package fdhook

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// FDHook is told about the long-lived file descriptors the core holds:
// those of the providers (the shm provider's memfds, eventfds, side-channel
// sockets and epoll sets, and the descriptors it takes over: Endpoint
// files passed to Connect, memfds received from peers) and of the
// transports (doorbell and kick eventfds). A program that shares its
// descriptor table with code that closes descriptors it does not know
// about (the shim under a host's close_range or closing loop) uses it to
// keep them out of that code's reach.
type FDHook struct {
	// Opened is called with each descriptor right after the core created
	// or took it over, before the core uses it. It may be called again
	// for a descriptor already reported (a direct, in-process Connect
	// hands one queue pair's files to another).
	Opened func(fd int)
	// Closing is called right before the core closes a descriptor it
	// reported; after the close, the number may be reused by anyone.
	Closing func(fd int)
}

var fdHook atomic.Pointer[FDHook]

// SetFDHook installs h for the whole process; a zero FDHook removes it.
// Descriptors opened before the call are not reported. Either function
// may be nil. They run with core and provider locks held, so they must be
// quick and must not call back into the core.
func SetFDHook(h FDHook) {
	if h.Opened == nil && h.Closing == nil {
		fdHook.Store(nil)
		return
	}
	fdHook.Store(&h)
}

// NoteFDs reports descriptors the core now holds (negative ones are
// skipped).
func NoteFDs(fds ...int) {
	h := fdHook.Load()
	if h == nil || h.Opened == nil {
		return
	}
	for _, fd := range fds {
		if fd >= 0 {
			h.Opened(fd)
		}
	}
}

// CloseFD reports fd as closing and closes it; a negative fd is ignored.
func CloseFD(fd int) {
	if fd < 0 {
		return
	}
	NoteClosing(fd)
	unix.Close(fd)
}

// NoteClosing reports fd as closing, for a caller that closes it another
// way (an *os.File around it). It must be called right before the close.
func NoteClosing(fd int) {
	if h := fdHook.Load(); h != nil && h.Closing != nil {
		h.Closing(fd)
	}
}

// Rights returns every descriptor the SCM_RIGHTS messages of oob (a
// recvmsg's control data) carry, and an error when oob holds anything
// else or cannot be parsed. The caller owns every descriptor returned,
// with an error too (it closes them). Empty oob: none, no error.
func Rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var first error
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		fds = append(fds, got...)
	}
	return fds, first
}
