package shim

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core"
)

// errnoOf is the one table that maps the core's errors to the errno a
// socket call returns, as kernel TCP would for the same event. Hooks
// return -errnoOf(err).
//
//	core.ErrWouldBlock            EAGAIN       nonblocking call, nothing to do
//	os.ErrDeadlineExceeded        EAGAIN       SO_RCVTIMEO / SO_SNDTIMEO passed
//	core.ErrReset                 ECONNRESET   the peer closed with unread data
//	core.ErrPeerGone              ECONNRESET   the peer process died
//	core.ErrProtocol              ECONNRESET   the peer wrote garbage: channel ended
//	core.ErrClosed                ECONNRESET   the channel was closed under us
//	core.ErrWriteShutdown         EPIPE        write after shutdown(SHUT_WR)
//	core.ErrStreamClosed          EBADF        use after close
//	unix.Errno                    itself       a system call failed
//	anything else                 EIO
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, core.ErrWouldBlock), errors.Is(err, os.ErrDeadlineExceeded):
		return unix.EAGAIN
	case errors.Is(err, core.ErrWriteShutdown):
		return unix.EPIPE
	case errors.Is(err, core.ErrStreamClosed):
		return unix.EBADF
	case errors.Is(err, core.ErrReset), errors.Is(err, core.ErrPeerGone),
		errors.Is(err, core.ErrProtocol), errors.Is(err, core.ErrClosed):
		return unix.ECONNRESET
	case errors.As(err, &e):
		return e
	case errors.Is(err, io.EOF):
		return 0
	}
	return unix.EIO
}

// neg returns a hook result for err: -errno.
func neg(err error) int64 { return -int64(errnoOf(err)) }

// negErrno returns a hook result for an errno.
func negErrno(e unix.Errno) int64 { return -int64(e) }
