package shim

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// errnoOf is the one table that maps the core's errors to the errno a
// socket call returns, as kernel TCP would for the same event. Hooks
// return -errnoOf(err).
//
//	wire.ErrWouldBlock            EAGAIN       nonblocking call, nothing to do
//	os.ErrDeadlineExceeded        EAGAIN       SO_RCVTIMEO / SO_SNDTIMEO passed
//	mux.ErrReset                 ECONNRESET   the peer closed with unread data
//	wire.ErrPeerGone              ECONNRESET   the peer process died
//	wire.ErrProtocol              ECONNRESET   the peer wrote garbage: channel ended
//	verbs.ErrClosed                ECONNRESET   the channel was closed under us
//	mux.ErrWriteShutdown         EPIPE        write after shutdown(SHUT_WR)
//	mux.ErrStreamClosed          EBADF        use after close
//	unix.Errno                    itself       a system call failed
//	anything else                 EIO
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, wire.ErrWouldBlock), errors.Is(err, os.ErrDeadlineExceeded):
		return unix.EAGAIN
	case errors.Is(err, mux.ErrWriteShutdown):
		return unix.EPIPE
	case errors.Is(err, mux.ErrStreamClosed):
		return unix.EBADF
	case errors.Is(err, mux.ErrReset), errors.Is(err, wire.ErrPeerGone),
		errors.Is(err, wire.ErrProtocol), errors.Is(err, verbs.ErrClosed):
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
