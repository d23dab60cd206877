package rendezvous

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wait"
)

// Every rendezvous socket is nonblocking; a wait goes through poll(2) with
// the remaining time to a deadline, so no read or write outlives it.

// errTimeout is a rendezvous deadline passing (wait.WaitFD's answer).
var errTimeout = wait.ErrFDTimeout

// peerCred returns the credentials of the process at the other end of the
// unix socket fd (SO_PEERCRED: pid and effective uid at connect or listen
// time).
func peerCred(fd int) (*unix.Ucred, error) {
	return unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
}

func closeFiles(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// guardedFD is a socket that another goroutine (a context's AfterFunc) may
// shut down to wake a waiter, without ever touching a closed, reused fd
// number.
type guardedFD struct {
	mu      sync.Mutex
	fd      int // -1 once closed
	closed  bool
	onClose func() // called once, at the close (when set)
}

func newGuardedFD(fd int) *guardedFD { return &guardedFD{fd: fd} }

// shutdown wakes every poll on the socket; a no-op once closed.
func (g *guardedFD) shutdown() {
	g.mu.Lock()
	if !g.closed {
		unix.Shutdown(g.fd, unix.SHUT_RDWR)
	}
	g.mu.Unlock()
}

// close closes the socket once; later calls are no-ops.
func (g *guardedFD) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		unix.Close(g.fd)
		g.fd = -1
		if g.onClose != nil {
			g.onClose()
		}
	}
	g.mu.Unlock()
}

// sendByte writes one byte without waiting; it reports whether it went.
func sendByte(fd int, b byte) bool {
	for {
		_, err := unix.SendmsgN(fd, []byte{b}, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		return err == nil
	}
}

// recvByte reads one byte without waiting. ok is false when nothing is
// there yet (EAGAIN); eof is true when the peer closed or the socket
// failed.
func recvByte(fd int) (b byte, ok, eof bool) {
	var buf [1]byte
	_, ok, eof = recvNow(fd, buf[:], 0)
	return buf[0], ok, eof
}

// recvQueued reads and decodes the frame whose first bytes a look saw
// (seen, peekFrame; read in one call when they hold it whole): its sender
// writes a frame in one piece, so the rest is waited for at most
// answerSendTimeout. The caller owns the files, also with a decoding
// error.
func recvQueued(fd int, seen []byte) (message, []int, error) {
	body, files, err := recvFrame(fd, seen, time.Now().Add(answerSendTimeout))
	if err != nil {
		return message{}, nil, err
	}
	m, err := decodeMessage(body)
	return m, files, err
}
