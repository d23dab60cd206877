package main

/*
#cgo CFLAGS: -I${SRCDIR}/../c -D_GNU_SOURCE
#include "sdpshim_core.h"
#include <stddef.h>

static int host_fd_state(struct sdpshim_host *h, int fd) { return h->fd_state(fd); }
static int host_fd_set_state(struct sdpshim_host *h, int fd, int st) { return h->fd_set_state(fd, st); }
static void host_fallback_count(struct sdpshim_host *h, int reason) { h->fallback_count(reason); }
static void host_direct_attach(struct sdpshim_host *h, int fd, void *conn)
{
	if (h->size >= offsetof(struct sdpshim_host, direct_attach) + sizeof h->direct_attach && h->direct_attach != NULL)
		h->direct_attach(fd, conn);
}
static int host_child_cores(struct sdpshim_host *h)
{
	if (h->size < offsetof(struct sdpshim_host, child_cores) + sizeof h->child_cores || h->child_cores == NULL)
		return 0;
	return h->child_cores();
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim"
)

// cHost is struct sdpshim_host as a shim.Host: its function pointers are
// plain C table operations, safe from any thread.
type cHost struct{ h *C.struct_sdpshim_host }

func (c cHost) FDState(fd int) shim.FDState {
	return shim.FDState(C.host_fd_state(c.h, C.int(fd)))
}

func (c cHost) SetFDState(fd int, st shim.FDState) error {
	if r := C.host_fd_set_state(c.h, C.int(fd), C.int(st)); r < 0 {
		return unix.Errno(-r)
	}
	return nil
}

func (c cHost) CountFallback(reason int) { C.host_fallback_count(c.h, C.int(reason)) }

// ChildCores reports whether fork children run a core of their own
// (shim.childCoreHost: group listeners, deferred acceptance).
func (c cHost) ChildCores() bool { return C.host_child_cores(c.h) != 0 }

// DirectAttach hands fd's data calls to the interposer over the direct
// handle conn (nil: back to the core); a no-op with an interposer older
// than the direct path (shim.directHost).
func (c cHost) DirectAttach(fd int, conn unsafe.Pointer) { C.host_direct_attach(c.h, C.int(fd), conn) }
