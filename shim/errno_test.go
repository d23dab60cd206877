package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

func TestErrnoTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want unix.Errno
	}{
		{nil, 0},
		{wire.ErrWouldBlock, unix.EAGAIN},
		{os.ErrDeadlineExceeded, unix.EAGAIN},
		{mux.ErrWriteShutdown, unix.EPIPE},
		{mux.ErrStreamClosed, unix.EBADF},
		{mux.ErrReset, unix.ECONNRESET},
		{fmt.Errorf("statusbyte: queue pair 1 in error state: %w", wire.ErrPeerGone), unix.ECONNRESET},
		{fmt.Errorf("stream 3: %w", wire.ErrProtocol), unix.ECONNRESET},
		{fmt.Errorf("channel: %w", verbs.ErrClosed), unix.ECONNRESET},
		{fmt.Errorf("setup: %w", unix.EMFILE), unix.EMFILE},
		{io.EOF, 0},
		{errors.New("something else"), unix.EIO},
	} {
		if got := errnoOf(tc.err); got != tc.want {
			t.Errorf("errnoOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
