package wait

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// ErrFDTimeout is WaitFD's answer when the deadline passes first.
var ErrFDTimeout = errors.New("descriptor not ready before the deadline")

// WaitFD waits with poll(2) until fd is ready for events or the deadline
// passes (zero: no deadline), so that no read or write on a nonblocking
// descriptor outlives its deadline. It returns nil also on POLLHUP and
// POLLERR (the next read or write reports what happened), EBADF on
// POLLNVAL, ErrFDTimeout at the deadline; EINTR is retried.
func WaitFD(fd int, events int16, deadline time.Time) error {
	for {
		ms := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return ErrFDTimeout
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(pfd, ms)
		switch {
		case err == unix.EINTR || (err == nil && n == 0):
			continue // the deadline check at the top decides
		case err != nil:
			return err
		case pfd[0].Revents&unix.POLLNVAL != 0:
			return unix.EBADF
		}
		return nil
	}
}
