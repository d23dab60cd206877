package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core"
)

func TestErrnoTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want unix.Errno
	}{
		{nil, 0},
		{core.ErrWouldBlock, unix.EAGAIN},
		{os.ErrDeadlineExceeded, unix.EAGAIN},
		{core.ErrWriteShutdown, unix.EPIPE},
		{core.ErrStreamClosed, unix.EBADF},
		{core.ErrReset, unix.ECONNRESET},
		{fmt.Errorf("statusbyte: queue pair 1 in error state: %w", core.ErrPeerGone), unix.ECONNRESET},
		{fmt.Errorf("stream 3: %w", core.ErrProtocol), unix.ECONNRESET},
		{fmt.Errorf("channel: %w", core.ErrClosed), unix.ECONNRESET},
		{fmt.Errorf("setup: %w", unix.EMFILE), unix.EMFILE},
		{io.EOF, 0},
		{errors.New("something else"), unix.EIO},
	} {
		if got := errnoOf(tc.err); got != tc.want {
			t.Errorf("errnoOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
