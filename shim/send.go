package shim

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core"
)

// Send is the send hook (write, send, sendto without an address).
func (p *Process) Send(fd int, buf []byte, flags int, w *Wait) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	st, r := s.active(w)
	if st == nil {
		return r
	}
	bufs := [1][]byte{buf}
	return s.send(st, bufs[:], flags, w)
}

// SendMsg is the sendmsg hook (sendmsg, writev, sendmmsg, sendto with an
// address): bufs are the iovecs. On a connected TCP socket the address
// and ancillary data are ignored, as the kernel does. MSG_FASTOPEN on a
// socket not connected yet stays on kernel TCP.
func (p *Process) SendMsg(fd int, bufs [][]byte, flags int, w *Wait) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	st, r := s.active(w)
	if st == nil {
		return r
	}
	return s.send(st, bufs, flags, w)
}

// send implements every send call of an accelerated socket: a blocking
// call returns when every byte went (into blocks, or the stream's send
// buffer for coalescing flow control), a nonblocking one (O_NONBLOCK,
// MSG_DONTWAIT) with what went or -EAGAIN, SO_SNDTIMEO as the kernel
// does; -EPIPE after shutdown(SHUT_WR); ECONNRESET once after a reset or
// the peer's death, -EPIPE after. The interposer raises SIGPIPE for -EPIPE
// unless MSG_NOSIGNAL.
func (s *Socket) send(st *core.Stream, bufs [][]byte, flags int, w *Wait) int64 {
	if flags&unix.MSG_OOB != 0 {
		return negErrno(unix.EOPNOTSUPP)
	}
	kept, back := s.resume(true)
	if back {
		s.woke(true)
	}
	deadline := deadlineOf(kept, back, s.sndTimeo.Load())
	if s.shutWR.Load() {
		return negErrno(unix.EPIPE)
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return 0
	}
	nonblock := s.nonblock.Load() || flags&unix.MSG_DONTWAIT != 0
	done := 0
	for {
		n, err := writeFrom(st, bufs, done)
		done += n
		switch {
		case done == total:
			return int64(done)
		case n > 0:
			continue
		case err != nil && !errors.Is(err, core.ErrWouldBlock):
			if done > 0 {
				return int64(done)
			}
			return s.writeErr(err)
		case nonblock || passed(deadline):
			if done > 0 {
				return int64(done)
			}
			return negErrno(unix.EAGAIN)
		}
		// The condition polled is a write attempt itself: room comes back
		// in ways that raise no event here (credits, freed blocks).
		var failed error
		ready := func() bool {
			n, err := writeFrom(st, bufs, done)
			done += n
			if err != nil && !errors.Is(err, core.ErrWouldBlock) {
				failed = err
			}
			return n > 0 || failed != nil
		}
		if !s.block(w, true, deadline, uint64(done), ready) {
			return WaitResult
		}
		if failed != nil {
			if done > 0 {
				return int64(done)
			}
			return s.writeErr(failed)
		}
		if done == total {
			return int64(done)
		}
	}
}

// writeErr maps a failed write: a reset or the channel's end is
// ECONNRESET the first time, EPIPE after.
func (s *Socket) writeErr(err error) int64 {
	s.p.log.WithError(err).Debug("send: stream ended")
	e := errnoOf(err)
	if e == unix.ECONNRESET && s.errSeen.Swap(true) {
		e = unix.EPIPE
	}
	return negErrno(e)
}

// gatherMax bounds the iovecs gathered into one write.
const gatherMax = 64 << 10

var gatherPool = sync.Pool{New: func() any { b := make([]byte, gatherMax); return &b }}

// writeFrom writes bufs past the first skip bytes, without waiting. It
// returns the bytes moved and, when none were, why. Several small iovecs
// go as one write (one message: credit flow control spends a block per
// write).
func writeFrom(st *core.Stream, bufs [][]byte, skip int) (int, error) {
	if len(bufs) > 1 {
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		if total-skip <= gatherMax {
			bp := gatherPool.Get().(*[]byte)
			g := (*bp)[:0]
			for _, b := range bufs {
				if skip >= len(b) {
					skip -= len(b)
					continue
				}
				g = append(g, b[skip:]...)
				skip = 0
			}
			n, err := st.Write(g)
			gatherPool.Put(bp)
			return n, err
		}
	}
	moved := 0
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		n, err := st.Write(b)
		moved += n
		if n < len(b) || err != nil {
			if moved > 0 {
				return moved, nil
			}
			return 0, err
		}
	}
	return moved, nil
}
