package direct

/*
#include "../../preload/c/direct.h"
#include <stdlib.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// TCPOpts keeps the program's TCP_NODELAY and TCP_CORK while the kernel
// socket beside an area needs its own (struct sdp_tcpopts,
// preload/c/direct.h): the rings a peer's sleeps arm go out on that
// socket, and must go at once. It lives in C memory, so that a handle
// that names it (Conn.SetTCPOpts) holds them at its first ring on the
// socket: a connection whose peer never needs a socket ring costs no
// system call for them. The memory goes with the TCPOpts (a cleanup),
// which the caller keeps while a handle may ring (until its SetRing(-1)).
type TCPOpts struct {
	c *C.struct_sdp_tcpopts
}

// NewTCPOpts returns a TCPOpts for a socket whose settings are its
// program's (none held).
func NewTCPOpts() *TCPOpts {
	c := (*C.struct_sdp_tcpopts)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sdp_tcpopts{}))))
	if c == nil {
		panic("direct: out of C memory")
	}
	t := &TCPOpts{c: c}
	runtime.AddCleanup(t, func(c *C.struct_sdp_tcpopts) { C.free(unsafe.Pointer(c)) }, c)
	return t
}

// Hold takes the program's settings off the socket fd now (TCP_NODELAY
// on, TCP_CORK off), unless they are held or were released.
func (t *TCPOpts) Hold(fd int) {
	C.sdp_tcpopts_hold(t.c, C.int(fd))
	runtime.KeepAlive(t)
}

// Get answers the program's getsockopt of name (TCP_NODELAY, TCP_CORK)
// while held; false: the socket's own answer applies.
func (t *TCPOpts) Get(name int) (int, bool) {
	var v C.int
	ok := C.sdp_tcpopts_get(t.c, C.int(name), &v) != 0
	runtime.KeepAlive(t)
	return int(v), ok
}

// Set keeps the program's setsockopt of name while held; false: it is
// for the socket.
func (t *TCPOpts) Set(name, v int) bool {
	ok := C.sdp_tcpopts_set(t.c, C.int(name), C.int(v)) != 0
	runtime.KeepAlive(t)
	return ok
}

// Release puts the program's settings back on the socket fd, for good:
// nothing holds them again (the connection is plain kernel TCP).
func (t *TCPOpts) Release(fd int) {
	C.sdp_tcpopts_release(t.c, C.int(fd))
	runtime.KeepAlive(t)
}

// SetTCPOpts names the socket options the handle's first ring on its
// socket holds (nil: none). Called before SetRing names the socket; t
// must stay reachable until SetRing(-1).
func (c *Conn) SetTCPOpts(t *TCPOpts) {
	h := c.hold()
	if h == nil {
		return
	}
	defer c.done()
	var p *C.struct_sdp_tcpopts
	if t != nil {
		p = t.c
	}
	h.opts = p
}
