package shm

import "github.com/sdpshim/sdpshim/core/fdhook"

// Every descriptor the provider creates or takes over is reported with
// noteFDs and closed with closeRaw, closeFD or closeFDs, so that the
// process's fdhook.FDHook sees each one (the shim protects them from the
// host program).

// noteFDs reports descriptors the provider now holds.
func noteFDs(fds ...int) { fdhook.NoteFDs(fds...) }

// closeRaw reports fd as closing and closes it.
func closeRaw(fd int) { fdhook.CloseFD(fd) }

// closeFD closes *fd if open and marks it closed.
func closeFD(fd *int) {
	closeRaw(*fd)
	*fd = -1
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		closeRaw(fd)
	}
}
