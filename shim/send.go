package shim

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Send is the send hook (write, send, sendto without an address).
func (p *Process) Send(fd int, buf []byte, flags int, w *Wait) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	bufs := [1][]byte{buf}
	st, r := s.activeForWrite(bufs[:], flags, w)
	if st == nil {
		return s.countSent(r, w)
	}
	return s.countSent(s.send(st, bufs[:], flags, w), w)
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
	st, r := s.activeForWrite(bufs, flags, w)
	if st == nil {
		return s.countSent(r, w)
	}
	return s.countSent(s.send(st, bufs, flags, w), w)
}

// activeForWrite is active for a write with flags: while the verdict is
// pending the bytes go into the early buffer (early.go), and r is their
// count.
func (s *Socket) activeForWrite(bufs [][]byte, flags int, w *Wait) (dataStream, int64) {
	if st, state := s.streamNow(); st == nil && state == sockConnecting {
		if n, ok := s.sendEarly(bufs); ok {
			return nil, n
		}
	}
	return s.active(w, flags&unix.MSG_DONTWAIT != 0, false)
}

// send implements every send call of an accelerated socket: a blocking
// call returns when every byte went (into blocks, or the stream's send
// buffer for coalescing flow control), a nonblocking one (O_NONBLOCK,
// MSG_DONTWAIT) with what went or -EAGAIN, SO_SNDTIMEO as the kernel
// does; -EPIPE after shutdown(SHUT_WR); ECONNRESET once after a reset or
// the peer's death, -EPIPE after. The interposer raises SIGPIPE for -EPIPE
// unless MSG_NOSIGNAL.
func (s *Socket) send(st dataStream, bufs [][]byte, flags int, w *Wait) int64 {
	if s.sw.Load() != swNone {
		return s.switchSend(flags, w) // switched to kernel TCP (forkswitch.go)
	}
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
	if s.peerFin.Load() {
		// Half-closed by the peer: a reset it answered an earlier write
		// with must be seen now, as the kernel's RST is.
		st.ReadReady()
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
	write := func() (int, error) {
		if !s.earlyFlushed(st) {
			return 0, wire.ErrWouldBlock // the early bytes go first
		}
		return writeFrom(st, bufs, done)
	}
	for {
		var timed func(int)
		if !nonblock {
			timed = s.bulkPoint(total - done) // preempt.go: small messages first
		}
		n, err := write()
		if timed != nil {
			timed(n)
		}
		done += n
		switch {
		case done == total:
			return int64(done)
		case n > 0:
			continue
		case err != nil && !errors.Is(err, wire.ErrWouldBlock):
			if done > 0 {
				return int64(done)
			}
			if s.sw.Load() != swNone {
				return s.switchSend(flags, w) // the stream closed for a switch (forkswitch.go)
			}
			return s.writeErr(err)
		case nonblock || passed(deadline):
			s.nospace.Add(1)
			if done > 0 {
				return int64(done)
			}
			return negErrno(unix.EAGAIN)
		}
		s.nospace.Add(1)
		// The condition polled is a write attempt itself: room comes back
		// in ways that raise no event here (credits, freed blocks).
		var failed error
		ready := func() bool {
			n, err := write()
			done += n
			if err != nil && !errors.Is(err, wire.ErrWouldBlock) {
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
			if s.sw.Load() != swNone {
				return s.switchSend(flags, w)
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
	if e == unix.ECONNRESET && (s.reportReset() || s.peerFin.Load()) {
		e = unix.EPIPE // a reset after the peer's FIN is EPIPE (tcp_reset in CLOSE_WAIT)
	}
	return negErrno(e)
}

// gatherMax bounds the iovecs gathered into one write, and the bytes one
// MSG_TRUNC receive drops (RecvDiscard).
const gatherMax = 64 << 10

// scratchPool holds gatherMax-byte buffers of the core's own: a write
// gathers iovecs into one, a MSG_TRUNC receive drops bytes into one.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, gatherMax); return &b }}

// writeFrom writes bufs past the first skip bytes, without waiting. It
// returns the bytes moved and, when none were, why. Several small iovecs
// go as one write (one message: credit flow control spends a block per
// write).
func writeFrom(st dataStream, bufs [][]byte, skip int) (int, error) {
	if len(bufs) > 1 {
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		if total-skip <= gatherMax {
			bp := scratchPool.Get().(*[]byte)
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
			scratchPool.Put(bp)
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
