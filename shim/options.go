package shim

import (
	"encoding/binary"
	"net/netip"
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
	st, state := s.streamNow()
	switch req {
	case unix.SIOCINQ:
		if st != nil {
			return st.Buffered(), 0
		}
		if state == sockConnecting {
			return 0, 0
		}
	case unix.SIOCOUTQ, unix.SIOCOUTQNSD:
		if ds := s.direct(); ds != nil {
			return ds.conn.Outq(), 0 // in the area, not read by the peer yet
		}
		if st != nil {
			return st.Unsent(), 0
		}
		if state == sockConnecting {
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
	if s != nil && level == unix.IPPROTO_TCP {
		if v, ok := s.tcpOptGet(name); ok {
			return v, 0
		}
		return 0, Pass
	}
	if s == nil || level != unix.SOL_SOCKET || name != unix.SO_ERROR || s.stream.Load() == nil {
		return 0, Pass
	}
	if s.streamFailed() && !s.reportReset() {
		return int(unix.ECONNRESET), 0
	}
	return 0, 0
}

// Setsockopt is the setsockopt hook: SO_RCVTIMEO and SO_SNDTIMEO are noted
// (blocking happens in the shim), then every option goes to the kernel.
func (p *Process) Setsockopt(fd, level, name int, val []byte) int64 {
	s := p.lookup(fd)
	if s != nil && level == unix.IPPROTO_TCP {
		if len(val) >= 4 && s.tcpOptSet(name, int(int32(binary.NativeEndian.Uint32(val)))) {
			return 0
		}
		return Pass
	}
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
	case unix.SO_RCVBUF, unix.SO_RCVBUFFORCE, unix.SO_SNDBUF, unix.SO_SNDBUFFORCE:
		return s.setBuffer(fd, name, val)
	}
	s.syncDirect()
	return Pass
}

// Buffer sizes. SO_RCVBUF and SO_SNDBUF set by the program are limits on
// the stream as well as the kernel socket's sizes: the receive buffer
// bounds the bytes the peer keeps unread here (announced to the peer's
// sending side, mux.Stream.SetRcvBuf), the send buffer what a buffered
// flow controller copies (mux.Stream.SetSendBuf). The value is the
// kernel's effective one, read back after the kernel took the option
// (doubled, clamped to net.core.rmem_max/wmem_max and the minimum), so
// getsockopt reads the same under the shim as without it. Sizes set on a
// listener pass to the sockets it accepts, as the kernel's do.

// setBuffer sets a buffer option on the kernel socket, then notes the
// effective size; the kernel's result is the call's.
func (s *Socket) setBuffer(fd, name int, val []byte) int64 {
	if err := unix.SetsockoptString(fd, unix.SOL_SOCKET, name, string(val)); err != nil {
		return negErrno(errnoOf(err))
	}
	rcv := name == unix.SO_RCVBUF || name == unix.SO_RCVBUFFORCE
	opt := unix.SO_SNDBUF
	if rcv {
		opt = unix.SO_RCVBUF
	}
	n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if err != nil || n <= 0 {
		return 0 // set; the limit stays as it was
	}
	if rcv {
		s.rcvBuf.Store(int32(n))
	} else {
		s.sndBuf.Store(int32(n))
	}
	if st := s.stream.Load(); st != nil {
		s.applyBuffers(st)
	}
	return 0
}

// applyBuffers hands the sizes the program set to st.
func (s *Socket) applyBuffers(st dataStream) {
	if n := s.rcvBuf.Load(); n > 0 {
		st.SetRcvBuf(int(n))
	}
	if n := s.sndBuf.Load(); n > 0 {
		st.SetSendBuf(int(n))
	}
}

// inheritBuffers gives an accepted socket its listener's sizes.
func (s *Socket) inheritBuffers(ls *Socket) {
	s.rcvBuf.Store(ls.rcvBuf.Load())
	s.sndBuf.Store(ls.sndBuf.Load())
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
	st, state := s.streamNow()
	if st == nil && state == sockConnecting {
		s.mu.Lock()
		r := s.settleLocked()
		if r.stream == nil && !r.fallback {
			// The verdict is pending (or deferred to the acceptor's first
			// use): the shutdown applies to the stream once accelerated
			// (accelerateLocked), to the kernel socket if the connection
			// falls back (fallBackLocked, after the early bytes: a FIN
			// now would go ahead of them).
			s.pendShut.Or(int32(how + 1))
			s.startPushLocked() // the FIN goes without the program's next call
			s.mu.Unlock()
			return 0
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
		s.mu.Lock()
		s.closeWriteLocked(st)
		s.mu.Unlock()
	}
	s.syncDirect()
	s.kernelShutdown(fd, how) // the kernel's FIN waits for a switch (forkswitch.go)
	s.wake.ring()
	return 0
}

// listenerRcvBuf returns the receive buffer set on the listener of addr,
// which the socket accepted for an offer will have: the stream opened for
// the offer announces it at once (mux.Channel.OpenRcvBuf), before the
// connector can write.
func (p *Process) listenerRcvBuf(addr netip.AddrPort) int {
	for _, s := range p.registeredListeners() {
		s.mu.Lock()
		port := s.listenAddr.Port()
		s.mu.Unlock()
		if port == addr.Port() {
			return int(s.rcvBuf.Load())
		}
	}
	return 0
}
