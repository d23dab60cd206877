package rendezvous

import (
	"encoding/binary"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/wait"
)

// sendFrame writes an encoded frame (message.encode) with files as
// SCM_RIGHTS on its first bytes, waiting at most until deadline. The
// caller keeps ownership of files.
func sendFrame(fd int, frame []byte, files []int, deadline time.Time) error {
	var oob []byte
	if len(files) > 0 {
		oob = unix.UnixRights(files...)
	}
	for sent := 0; sent < len(frame); {
		n, err := unix.SendmsgN(fd, frame[sent:], oob, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := wait.WaitFD(fd, unix.POLLOUT, deadline); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		if n > 0 {
			oob = nil // the rights went with the first bytes
		}
		sent += n
	}
	return nil
}

// peekLen is how many queued bytes a look at a rendezvous connection
// takes in (peekFrame, queued): every frame of a connection's setup fits.
const peekLen = 512

// peekFrame looks at what fd holds without taking it or waiting: seen is
// up to peekLen of its queued bytes, ok false when there are none yet,
// eof true when the peer closed or the socket failed. A frame seen whole
// is then read in one call (recvFrame). Files that came with the bytes
// are not taken by the look.
func peekFrame(fd int, buf *[peekLen]byte) (seen []byte, ok, eof bool) {
	n, ok, eof := recvNow(fd, buf[:], unix.MSG_PEEK)
	return buf[:n], ok, eof
}

// recvNow receives into b without waiting (flags: MSG_PEEK or 0): n bytes
// and ok, or nothing yet (EAGAIN), or eof when the peer closed or the
// socket failed.
func recvNow(fd int, b []byte, flags int) (n int, ok, eof bool) {
	for {
		n, _, err := unix.Recvfrom(fd, b, flags|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, false, false
		case err != nil || n == 0:
			return 0, false, true
		}
		return n, true, false
	}
}

// recvFrame reads one frame, waiting at most until deadline. seen is what
// a look at fd saw of it (peekFrame), or nil: a frame it holds whole is
// taken in one read, else its length and then its body. The length
// prefix is checked before the body is allocated; more than MaxFiles
// files, a truncated control message, a short frame or an error close
// every file that arrived. On success the caller owns files.
func recvFrame(fd int, seen []byte, deadline time.Time) (body []byte, files []int, err error) {
	defer func() {
		if err != nil {
			closeFiles(files)
			files = nil
		}
		if err == errClosedIdle && body != nil {
			err = errEOF // the length came: closed mid-frame
		}
	}()
	if len(seen) >= 4 {
		if n := binary.LittleEndian.Uint32(seen); checkBodyLen(n) == nil && len(seen) >= 4+int(n) {
			frame := make([]byte, 4+n)
			files, err = recvFull(fd, frame, nil, deadline)
			return frame[4:], files, err
		}
	}
	var hdr [4]byte
	if files, err = recvFull(fd, hdr[:], files, deadline); err != nil {
		return nil, files, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if err := checkBodyLen(n); err != nil {
		return nil, files, err
	}
	body = make([]byte, n)
	files, err = recvFull(fd, body, files, deadline)
	return body, files, err
}

// errEOF: the peer closed before a whole frame arrived. errClosedIdle
// (one of it): it closed before sending a byte, as a liveness probe does
// (probeSocket).
var (
	errEOF        = &chainErr{"connection closed mid-frame", errMessage}
	errClosedIdle = &chainErr{"closed before a frame", errEOF}
)

// chainErr says msg and wraps next, as fmt.Errorf("msg: %w") would. The
// package's error values are made with it: a fmt call while the package
// initialises faults fmt's code in, in every process whose core loads,
// before it has anything to format.
type chainErr struct {
	msg  string
	next error
}

func (e *chainErr) Error() string { return e.msg + ": " + e.next.Error() }
func (e *chainErr) Unwrap() error { return e.next }

func recvFull(fd int, p []byte, files []int, deadline time.Time) ([]int, error) {
	oob := make([]byte, unix.CmsgSpace(4*MaxFiles))
	for got := 0; got < len(p); {
		n, oobn, flags, _, err := unix.Recvmsg(fd, p[got:], oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		if oobn > 0 {
			fds, perr := fdhook.Rights(oob[:oobn])
			files = append(files, fds...)
			if perr != nil {
				return files, fmt.Errorf("control message: %v: %w", perr, errMessage)
			}
		}
		if flags&unix.MSG_CTRUNC != 0 || len(files) > MaxFiles {
			return files, fmt.Errorf("more than %d files: %w", MaxFiles, errMessage)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := wait.WaitFD(fd, unix.POLLIN, deadline); err != nil {
				return files, err
			}
			continue
		case err != nil:
			return files, err
		case n == 0 && got == 0:
			return files, errClosedIdle
		case n == 0:
			return files, errEOF
		}
		got += n
	}
	return files, nil
}
