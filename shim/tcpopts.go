package shim

import (
	"sync"

	"golang.org/x/sys/unix"
)

// tcpOpts holds the program's TCP_NODELAY and TCP_CORK of a direct
// connection while it is accelerated. The kernel socket beside the area
// carries the peer's rings (direct.go), one byte each, which must go at
// once: Nagle's algorithm would hold a ring while the last one is not
// acknowledged (the peer delays its ACK up to 40 ms), and a cork for up to
// 200 ms. So the kernel socket has TCP_NODELAY on and TCP_CORK off while
// the connection is direct, the program's settings are kept here (its
// getsockopt reads them), and they go to the kernel socket when the
// connection becomes plain kernel TCP (a switch).
type tcpOpts struct {
	mu      sync.Mutex
	held    bool // the program's settings are here, not on the kernel socket
	noDelay int
	cork    int
}

// hold takes the program's settings off the kernel socket fd.
func (o *tcpOpts) hold(fd int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held {
		return
	}
	nd, err1 := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	ck, err2 := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK)
	if err1 != nil || err2 != nil {
		return
	}
	o.noDelay, o.cork, o.held = nd, ck, true
	if ck != 0 {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, 0)
	}
	if nd == 0 {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
}

// release puts the program's settings on the kernel socket fd.
func (o *tcpOpts) release(fd int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.held {
		return
	}
	o.held = false
	if o.noDelay == 0 {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 0)
	}
	if o.cork != 0 {
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_CORK, o.cork)
	}
}

// get answers getsockopt for name while the settings are held.
func (o *tcpOpts) get(name int) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.held:
		return 0, false
	case name == unix.TCP_NODELAY:
		return o.noDelay, true
	case name == unix.TCP_CORK:
		return o.cork, true
	}
	return 0, false
}

// set keeps a setsockopt of name while the settings are held (as the
// kernel stores it: any non-zero TCP_NODELAY is 1); false: not held.
func (o *tcpOpts) set(name, v int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.held:
		return false
	case name == unix.TCP_NODELAY:
		o.noDelay = 0
		if v != 0 {
			o.noDelay = 1
		}
		return true
	case name == unix.TCP_CORK:
		o.cork = v
		return true
	}
	return false
}
