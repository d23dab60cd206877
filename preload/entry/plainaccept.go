package main

/*
#cgo CFLAGS: -I${SRCDIR}/../c -D_GNU_SOURCE
#include "sdpshim_core.h"
#include <stddef.h>
#include <stdlib.h>

static int host_has_plain_accept(struct sdpshim_host *h)
{
	return h->size >= offsetof(struct sdpshim_host, accept_plain) + sizeof h->accept_plain &&
	       h->accept_listener != NULL && h->accept_held != NULL && h->accept_quiet != NULL && h->accept_plain != NULL;
}
static void host_accept_listener(struct sdpshim_host *h, int fd, uint64_t cookie) { h->accept_listener(fd, cookie); }
static void host_accept_held(struct sdpshim_host *h, uint32_t n) { h->accept_held(n); }
static void host_accept_quiet(struct sdpshim_host *h, const char *dir, uint64_t dev, uint64_t ino, int64_t sec, int64_t nsec, int rvfd)
{
	h->accept_quiet(dir, dev, ino, sec, nsec, rvfd);
}
static uint64_t host_accept_plain(struct sdpshim_host *h) { return __atomic_load_n(h->accept_plain, __ATOMIC_RELAXED); }
*/
import "C"

import (
	"unsafe"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// cHost's side of the accepts the interposer decides alone
// (preload/c/plainaccept.c; shim's plainAcceptHost).

// DecidesPlainAccepts reports whether the interposer has them.
func (c cHost) DecidesPlainAccepts() bool { return C.host_has_plain_accept(c.h) != 0 }

// AcceptListener marks listener fd (cookie: its SO_COOKIE; 0 unmarks).
func (c cHost) AcceptListener(fd int, cookie uint64) {
	C.host_accept_listener(c.h, C.int(fd), C.uint64_t(cookie))
}

// AcceptHeld tells how many offers the core holds unclaimed.
func (c cHost) AcceptHeld(n int) { C.host_accept_held(c.h, C.uint32_t(n)) }

// AcceptQuiet tells in which state the record directory dir held no
// deferral record, and the rendezvous socket rvfd.
func (c cHost) AcceptQuiet(dir string, st rendezvous.DirState, rvfd int) {
	cs := C.CString(dir)
	defer C.free(unsafe.Pointer(cs))
	C.host_accept_quiet(c.h, cs, C.uint64_t(st.Dev), C.uint64_t(st.Ino), C.int64_t(st.Mtime.Sec), C.int64_t(st.Mtime.Nsec), C.int(rvfd))
}

// plainAccepts reads how many accepts the interposer kept on kernel TCP.
func (c cHost) plainAccepts() uint64 {
	if C.host_has_plain_accept(c.h) == 0 {
		return 0
	}
	return uint64(C.host_accept_plain(c.h))
}
