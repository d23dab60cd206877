package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../probes/c
#include <stdint.h>
#include "probe.h"
#include "sdpshim_core.h"

static uint64_t host_fallback_read(struct sdpshim_host *h, int code)
{
	if (h->fallback == 0 || code <= 0 || code >= SDPSHIM_REASON_MAX)
		return 0;
	return __atomic_load_n(&h->fallback[code], __ATOMIC_RELAXED);
}
*/
import "C"

// cHost is a shim.Observer: the probe functions of probe.c, and the
// interposer's own fallback counts (host->fallback).

// ProbeFallback fires sdpshim_probe_fallback.
func (c cHost) ProbeFallback(reason, fd int, cookie uint64) {
	C.sdpshim_probe_fallback(C.int(reason), C.int(fd), C.uint64_t(cookie))
}

// ProbeAccelerated fires sdpshim_probe_accelerated.
func (c cHost) ProbeAccelerated(transport, fd int, cookie uint64) {
	C.sdpshim_probe_accelerated(C.int(transport), C.int(fd), C.uint64_t(cookie))
}

// InterposerFallbacks reads the interposer's count for code: its own
// codes (64 and up), the accepts it kept on kernel TCP alone
// (peer-not-shimmed) and the connects it kept plain alone (short-lived);
// the core counts the others in its registry.
func (c cHost) InterposerFallbacks(code int) uint64 {
	if code < C.SDPSHIM_REASON_SHIM_FIRST {
		switch code {
		case C.SDPSHIM_REASON_NOT_SHIMMED:
			return c.plainAccepts()
		case C.SDPSHIM_REASON_SHORT_LIVED:
			return c.shortPlains()
		}
		return 0
	}
	return uint64(C.host_fallback_read(c.h, C.int(code)))
}
