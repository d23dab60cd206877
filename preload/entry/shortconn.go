package main

/*
#cgo CFLAGS: -I${SRCDIR}/../c -D_GNU_SOURCE
#include "sdpshim_core.h"
#include <stddef.h>

static int host_has_short_runs(struct sdpshim_host *h)
{
	return h->size >= offsetof(struct sdpshim_host, short_plain) + sizeof h->short_plain &&
	       h->short_run != NULL && h->short_left != NULL && h->short_take != NULL && h->short_plain != NULL;
}
static int host_short_run(struct sdpshim_host *h, const uint8_t *a, uint32_t n, uint16_t port, int32_t run)
{
	return h->short_run(a, n, port, run);
}
static int host_short_left(struct sdpshim_host *h, const uint8_t *a, uint32_t n, uint16_t port)
{
	return h->short_left(a, n, port);
}
static int host_short_take(struct sdpshim_host *h, const uint8_t *a, uint32_t n, uint16_t port)
{
	return h->short_take(a, n, port);
}
static uint64_t host_short_plain(struct sdpshim_host *h) { return __atomic_load_n(h->short_plain, __ATOMIC_RELAXED); }
*/
import "C"

import (
	"net/netip"
	"unsafe"
)

// cHost's side of the short-lived rule's plain runs
// (preload/c/shortconn.c; shim's shortRunHost).

// KeepsShortRuns reports whether the interposer has them.
func (c cHost) KeepsShortRuns() bool { return C.host_has_short_runs(c.h) != 0 }

// destination is dst's address bytes (an IPv4-mapped one as IPv4) and port.
func destination(dst netip.AddrPort) ([16]byte, C.uint32_t, C.uint16_t) {
	var b [16]byte
	a := dst.Addr().Unmap()
	n := copy(b[:], a.AsSlice())
	return b, C.uint32_t(n), C.uint16_t(dst.Port())
}

// ShortRun keeps the next n connections to dst on kernel TCP (0 ends
// the run); false when the interposer has no room for it.
func (c cHost) ShortRun(dst netip.AddrPort, n int) bool {
	b, l, port := destination(dst)
	return C.host_short_run(c.h, (*C.uint8_t)(unsafe.Pointer(&b[0])), l, port, C.int32_t(n)) != 0
}

// ShortLeft is how many connections of dst's run are left.
func (c cHost) ShortLeft(dst netip.AddrPort) int {
	b, l, port := destination(dst)
	return int(C.host_short_left(c.h, (*C.uint8_t)(unsafe.Pointer(&b[0])), l, port))
}

// ShortTake takes one connection of dst's run: true when there was one.
func (c cHost) ShortTake(dst netip.AddrPort) bool {
	b, l, port := destination(dst)
	return C.host_short_take(c.h, (*C.uint8_t)(unsafe.Pointer(&b[0])), l, port) != 0
}

// shortPlains reads how many connects the interposer kept plain alone.
func (c cHost) shortPlains() uint64 {
	if C.host_has_short_runs(c.h) == 0 {
		return 0
	}
	return uint64(C.host_short_plain(c.h))
}
