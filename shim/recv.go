package shim

import (
	"errors"
	"io"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Recv is the recv hook (read, recv, recvfrom, __read_chk, ...): up to
// len(buf) bytes into the caller's buffer.
func (p *Process) Recv(fd int, buf []byte, flags int, w *Wait) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	st, r := s.active(w, flags&unix.MSG_DONTWAIT != 0, true)
	if st == nil {
		return r
	}
	bufs := [1][]byte{buf}
	return s.countReceived(s.recv(st, bufs[:], flags, w), flags, w)
}

// RecvDiscard is a receive with MSG_TRUNC, as TCP has it: up to n bytes
// are taken (with MSG_PEEK, looked at) and dropped, and their count
// returned; the caller's buffer is neither written nor needed, so NULL
// skips bytes. At most gatherMax a call (a receive may return less than
// it asked for; with MSG_WAITALL too).
func (p *Process) RecvDiscard(fd, n, flags int, w *Wait) int64 {
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	return p.Recv(fd, (*bp)[:min(n, len(*bp))], flags&^unix.MSG_TRUNC, w)
}

// RecvMsg is the recvmsg hook (recvmsg, readv, recvmmsg): bufs are the
// iovecs. The caller sets msg_flags, msg_controllen and msg_namelen to 0
// on success (TCP has no truncation, ancillary data or source address).
func (p *Process) RecvMsg(fd int, bufs [][]byte, flags int, w *Wait) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	st, r := s.active(w, flags&unix.MSG_DONTWAIT != 0, true)
	if st == nil {
		return r
	}
	return s.countReceived(s.recv(st, bufs, flags, w), flags, w)
}

// recv implements every receive call of an accelerated socket with the
// kernel's semantics (MSG_TRUNC: RecvDiscard): MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT, O_NONBLOCK,
// SO_RCVTIMEO, EOF after the peer's FIN (0), ECONNRESET once after a reset
// or the peer's death (then EOF), 0 after shutdown(SHUT_RD) once drained.
func (s *Socket) recv(st dataStream, bufs [][]byte, flags int, w *Wait) int64 {
	switch {
	case flags&unix.MSG_OOB != 0:
		return negErrno(unix.EINVAL) // no urgent data, ever
	case flags&unix.MSG_ERRQUEUE != 0:
		return negErrno(unix.EAGAIN)
	}
	kept, back := s.resume(false)
	if back {
		s.woke(false)
	}
	deadline := deadlineOf(kept, back, s.rcvTimeo.Load())
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if !back {
		s.noteRecv(total) // once a call: not again after its sleep
	}
	peek := flags&unix.MSG_PEEK != 0
	waitAll := flags&unix.MSG_WAITALL != 0 && !peek
	nonblock := s.nonblock.Load() || flags&unix.MSG_DONTWAIT != 0
	done := 0
	for {
		n, err := readInto(st, bufs, done, peek)
		done += n
		if n > 0 && !peek {
			s.rxRead.Add(uint64(n))
		}
		if n > 0 && (!waitAll || done == total) {
			return int64(done)
		}
		if total == 0 {
			return 0
		}
		switch {
		case n > 0:
			continue // MSG_WAITALL: more may be there already
		case err != nil && !errors.Is(err, wire.ErrWouldBlock) && done == 0 && s.sw.Load() != swNone:
			// Switched to kernel TCP (forkswitch.go; the switch may have
			// closed the stream while this call read it): the rest comes
			// from the kernel socket.
			return s.switchEOF(flags, w)
		case errors.Is(err, io.EOF):
			s.peerFin.Store(true)
			return int64(done)
		case err != nil && !errors.Is(err, wire.ErrWouldBlock):
			if done > 0 {
				return int64(done)
			}
			if s.reportReset() {
				return 0 // the reset was reported: EOF from now on
			}
			s.p.log.WithError(err).Debug("recv: stream ended")
			return neg(err)
		case s.shutRD.Load():
			return int64(done)
		case nonblock || passed(deadline):
			if done > 0 {
				return int64(done)
			}
			return negErrno(unix.EAGAIN)
		}
		if !s.block(w, false, deadline, uint64(done), st.ReadReady) {
			return WaitResult
		}
	}
}

// readInto reads (or peeks) into bufs past the first skip bytes: what has
// arrived, without waiting. It returns the bytes moved and, when none
// were, why (wire.ErrWouldBlock when nothing has arrived).
func readInto(st dataStream, bufs [][]byte, skip int, peek bool) (int, error) {
	if peek && len(bufs) > 1 {
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		tmp := make([]byte, total)
		n, err := st.Peek(tmp)
		rest := tmp[:n]
		for _, b := range bufs {
			rest = rest[copy(b, rest):]
		}
		return n, err
	}
	moved := 0
	for _, b := range bufs {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		var n int
		var err error
		if peek {
			n, err = st.Peek(b)
		} else {
			n, err = st.Read(b)
		}
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
