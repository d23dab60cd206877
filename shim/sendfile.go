package shim

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wire"
)

// sendfile and splice onto (or off) an accelerated socket: the bytes go
// through the stream, read from (or written to) the other descriptor by
// the shim.

const fileChunk = 64 << 10

// SendFile is the sendfile hook: count bytes from in (at *off when off is
// not nil, which is then advanced; else at in's file offset) to out.
func (p *Process) SendFile(out, in int, off *int64, count int, w *Wait) int64 {
	if p.fds.socket(in) != nil && p.fds.socket(in).getState() == sockAccelerated {
		return negErrno(unix.EINVAL) // the kernel cannot read a socket here either
	}
	s := p.fds.socket(out)
	if s == nil {
		return Pass
	}
	st, r := s.active(w, false, false)
	if st == nil {
		return r
	}
	return s.countSent(s.fromFile(st, in, off, count, w), w)
}

// fromFile moves count bytes from file in into the stream, with send's
// semantics (send.go): nonblocking sockets get what fitted or -EAGAIN,
// blocking ones wait (SO_SNDTIMEO), each refused write counts as "no
// space" (the edge EPOLLET's EPOLLOUT waits for), early bytes go first, and
// a socket switched to kernel TCP passes to the kernel's sendfile. Bytes
// read but not taken by the stream are given back to the file (the offset
// is not advanced past them, or the file offset is moved back).
func (s *Socket) fromFile(st dataStream, in int, off *int64, count int, w *Wait) int64 {
	if s.sw.Load() != swNone {
		return s.switchSend(0, w) // switched to kernel TCP (forkswitch.go)
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
		st.ReadReady() // a reset answering an earlier write is seen now
	}
	buf := make([]byte, min(count, fileChunk))
	done := 0
	for done < count {
		var timed func(int)
		if !s.nonblock.Load() {
			timed = s.bulkPoint(count - done) // preempt.go: small messages first
		}
		m, rerr, werr := s.fileChunk(st, in, off, buf[:min(len(buf), count-done)])
		if timed != nil {
			timed(m)
		}
		done += m
		switch {
		case m > 0:
			continue
		case rerr != nil || werr == nil:
			// The file failed or ended: what went, else its error or 0.
			if done > 0 {
				return int64(done)
			}
			return neg(rerr)
		case !errors.Is(werr, wire.ErrWouldBlock):
			if done > 0 {
				return int64(done)
			}
			if s.sw.Load() != swNone {
				return s.switchSend(0, w)
			}
			return s.writeErr(werr)
		}
		s.nospace.Add(1)
		if s.nonblock.Load() || passed(deadline) {
			if done > 0 {
				return int64(done)
			}
			return negErrno(unix.EAGAIN)
		}
		gen := s.wake.gen()
		ready := func() bool {
			st.ReadReady()
			st.WriteReady()
			return s.wake.gen() != gen
		}
		if !s.block(w, true, deadline, uint64(done), ready) {
			return WaitResult
		}
	}
	return int64(done)
}

// fileChunk reads up to len(buf) bytes of the file and writes them into
// the stream, giving back to the file what the stream did not take. It
// returns the bytes moved, the read's error, and, when nothing moved but
// bytes were read, why the stream took none (nil werr with m == 0: the
// file is at its end).
func (s *Socket) fileChunk(st dataStream, in int, off *int64, buf []byte) (m int, rerr, werr error) {
	if !s.earlyFlushed(st) {
		return 0, nil, wire.ErrWouldBlock // the early bytes go first
	}
	var n int
	if off != nil {
		n, rerr = unix.Pread(in, buf, *off)
	} else {
		n, rerr = unix.Read(in, buf)
	}
	if rerr != nil || n == 0 {
		return 0, rerr, nil
	}
	m, werr = writeFrom(st, [][]byte{buf[:n]}, 0)
	if m < n && off == nil {
		unix.Seek(in, int64(m-n), 1) // give back what the stream did not take
	}
	if off != nil {
		*off += int64(m)
	}
	if m > 0 {
		werr = nil
	} else if werr == nil {
		werr = wire.ErrWouldBlock
	}
	return m, nil, werr
}

// Splice is the splice hook: one side is a pipe, the other an
// accelerated socket (either side may also be a file or plain socket the
// kernel handles: Pass).
func (p *Process) Splice(in int, offIn *int64, out int, offOut *int64, n int, w *Wait) int64 {
	if s := p.fds.socket(out); s != nil {
		st, r := s.active(w, false, false)
		if st == nil {
			return r
		}
		if offIn != nil {
			return s.countSent(s.fromFile(st, in, offIn, n, w), w)
		}
		return s.countSent(s.fromPipe(st, in, n), w)
	}
	if s := p.fds.socket(in); s != nil {
		st, r := s.active(w, false, false)
		if st == nil {
			return r
		}
		return s.countReceived(s.toPipe(st, out, n, w), 0, w)
	}
	return Pass
}

// fromPipe moves up to n bytes from pipe in into the stream. Bytes read
// from a pipe cannot be given back, so once read they are written whole,
// waiting in Go if the stream is full (a rare path).
func (s *Socket) fromPipe(st dataStream, in, n int) int64 {
	buf := make([]byte, min(n, fileChunk))
	k, err := unix.Read(in, buf)
	if err != nil || k == 0 {
		return neg(err)
	}
	for off := 0; off < k; {
		gen := s.wake.gen()
		m, werr := st.Write(buf[off:k])
		off += m
		if werr != nil && werr != wire.ErrWouldBlock {
			if off > 0 {
				return int64(off)
			}
			return s.writeErr(werr)
		}
		if off < k && m == 0 {
			s.sleepBegin(true, 0, 10*time.Millisecond)
			st.WriteReady()
			if s.wake.gen() == gen {
				ts := unix.NsecToTimespec(int64(10 * time.Millisecond))
				unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(s.wake.word)), 0, uintptr(gen), uintptr(unsafe.Pointer(&ts)), 0, 0)
			}
			s.resume(true)
		}
	}
	return int64(k)
}

// toPipe moves up to n bytes from the stream into pipe out: peeked, written
// to the pipe, then consumed as far as the pipe took them.
func (s *Socket) toPipe(st dataStream, out, n int, w *Wait) int64 {
	buf := make([]byte, min(n, fileChunk))
	bufs := [1][]byte{buf}
	r := s.recv(st, bufs[:], unix.MSG_PEEK, w)
	if r <= 0 {
		return r
	}
	k, err := unix.Write(out, buf[:r])
	if err != nil {
		return neg(err)
	}
	st.Read(buf[:k])
	return int64(k)
}
