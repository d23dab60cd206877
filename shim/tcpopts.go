package shim

import (
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
)

// The program's TCP_NODELAY and TCP_CORK of a direct connection. The
// kernel socket beside the area carries the peer's rings (direct.go), one
// byte each, which must go at once: Nagle's algorithm would hold a ring
// while the last one is not acknowledged (the peer delays its ACK up to
// 40 ms), and a cork for up to 200 ms. So while rings may go out, the
// kernel socket has TCP_NODELAY on and TCP_CORK off, the program's
// settings are kept aside (its getsockopt reads them, its setsockopt
// writes them there), and they go back on the socket when the connection
// becomes plain kernel TCP (a switch, a fallback). The handle takes them
// off the socket at its first ring on it (direct.TCPOpts): most
// connections never ring on their socket (the peer holds the sleepers'
// bells), and taking them at the start cost each end three system calls
// a connection. A deferred connection's early bytes on the kernel socket
// (early.go) take them off at once, and so does a fork that keeps
// connections (forkkeep.go), in this process's memory: a child's copy of
// the handle rings without taking them.

// tcpOptsLocked returns s's kept settings, made on first use.
//
// +checklocks:s.mu
func (s *Socket) tcpOptsLocked() *direct.TCPOpts {
	t := s.tcpOpts.Load()
	if t == nil {
		t = direct.NewTCPOpts()
		s.tcpOpts.Store(t)
	}
	return t
}

// keptOpt reports whether name is one of the options kept aside.
func keptOpt(name int) bool { return name == unix.TCP_NODELAY || name == unix.TCP_CORK }

// tcpOptGet answers getsockopt(IPPROTO_TCP, name) while the settings are
// kept aside; false: the kernel answers.
func (s *Socket) tcpOptGet(name int) (int, bool) {
	if t := s.tcpOpts.Load(); t != nil && keptOpt(name) {
		return t.Get(name)
	}
	return 0, false
}

// tcpOptSet keeps setsockopt(IPPROTO_TCP, name, v) while the settings
// are kept aside; false: for the kernel.
func (s *Socket) tcpOptSet(name, v int) bool {
	t := s.tcpOpts.Load()
	return t != nil && keptOpt(name) && t.Set(name, v)
}

// tcpOptsRelease puts the program's settings back on the socket fd.
func (s *Socket) tcpOptsRelease(fd int) {
	if t := s.tcpOpts.Load(); t != nil {
		t.Release(fd)
	}
}
