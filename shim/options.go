package shim

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// Socket options, ioctls and shutdown of accelerated sockets. The kernel
// socket stays connected beside the stream, so options are the kernel's
// (Pass): the shim only notes the timeouts it must honour itself.

// Ioctl is the ioctl hook. For FIONREAD (SIOCINQ) of an accelerated
// socket it returns the bytes a read would return at once; SIOCOUTQ and
// SIOCOUTQNSD the bytes written that have not been handed to the peer
// yet (queued in the stream, not in blocks). val is
// stored as an int by the caller when res is 0.
func (p *Process) Ioctl(fd int, req uint) (val int, res int64) {
	s := p.lookup(fd)
	if s == nil {
		return 0, Pass
	}
	st := s.stream.Load()
	switch req {
	case unix.SIOCINQ:
		if st != nil {
			return st.Buffered(), 0
		}
		if s.getState() == sockConnecting {
			return 0, 0
		}
	case unix.SIOCOUTQ, unix.SIOCOUTQNSD:
		if st != nil {
			return st.Unsent(), 0
		}
		if s.getState() == sockConnecting {
			return 0, 0
		}
	}
	return 0, Pass
}

// Getsockopt is the getsockopt hook: the kernel answers (Pass), except
// SO_ERROR of an accelerated socket: the stream's reset, once (reading it
// clears it, as the kernel's sk_err), stored as an int when res is 0.
func (p *Process) Getsockopt(fd, level, name int) (val int, res int64) {
	s := p.lookup(fd)
	if s == nil || level != unix.SOL_SOCKET || name != unix.SO_ERROR || s.stream.Load() == nil {
		return 0, Pass
	}
	if s.streamFailed() && !s.errSeen.Swap(true) {
		return int(unix.ECONNRESET), 0
	}
	return 0, 0
}

// Setsockopt is the setsockopt hook: SO_RCVTIMEO and SO_SNDTIMEO are noted
// (blocking happens in the shim), then every option goes to the kernel.
func (p *Process) Setsockopt(fd, level, name int, val []byte) int64 {
	s := p.lookup(fd)
	if s == nil || level != unix.SOL_SOCKET {
		return Pass
	}
	switch name {
	case unix.SO_LINGER:
		if len(val) >= 8 {
			on := binary.NativeEndian.Uint32(val) != 0
			s.abortClose.Store(on && binary.NativeEndian.Uint32(val[4:]) == 0)
		}
	case unix.SO_RCVTIMEO, unix.SO_RCVTIMEO_NEW:
		if d, ok := timevalOf(val); ok {
			s.rcvTimeo.Store(int64(d))
		}
	case unix.SO_SNDTIMEO, unix.SO_SNDTIMEO_NEW:
		if d, ok := timevalOf(val); ok {
			s.sndTimeo.Store(int64(d))
		}
	}
	return Pass
}

// timevalOf decodes a struct timeval (64-bit fields).
func timevalOf(b []byte) (time.Duration, bool) {
	if len(b) < 16 {
		return 0, false
	}
	sec := int64(binary.NativeEndian.Uint64(b))
	usec := int64(binary.NativeEndian.Uint64(b[8:]))
	if sec < 0 || usec < 0 || usec >= 1e6 {
		return 0, false
	}
	return time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond, true
}

// Shutdown is the shutdown hook. On an accelerated socket SHUT_WR sends
// the stream's FIN after the queued bytes, SHUT_RD makes reads return EOF
// once drained; the kernel socket is shut down the same way.
func (p *Process) Shutdown(fd, how int) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	if how != unix.SHUT_RD && how != unix.SHUT_WR && how != unix.SHUT_RDWR {
		return Pass // the kernel's EINVAL
	}
	st := s.stream.Load()
	if st == nil && s.getState() == sockConnecting {
		s.mu.Lock()
		r := s.settleLocked()
		if r.stream == nil && !r.fallback {
			// The verdict is pending: the shutdown applies to the stream
			// once accelerated (accelerateLocked), to the kernel socket
			// now (which also carries it if the connection falls back).
			s.pendShut.Or(int32(how + 1))
		}
		s.mu.Unlock()
		st = r.stream
	}
	if st == nil {
		return Pass
	}
	if how != unix.SHUT_WR {
		s.shutRD.Store(true)
	}
	if how != unix.SHUT_RD {
		s.shutWR.Store(true)
		st.CloseWrite()
	}
	s.kernelShutdown(fd, how) // the kernel's FIN waits for a switch (forkswitch.go)
	s.wake.ring()
	return 0
}
