package main

/*
#cgo CFLAGS: -I${SRCDIR}/../c -D_GNU_SOURCE
#include "sdpshim_core.h"
#include <stddef.h>
#include <stdlib.h>

static int host_fd_state(struct sdpshim_host *h, int fd) { return h->fd_state(fd); }
static int host_fd_set_state(struct sdpshim_host *h, int fd, int st) { return h->fd_set_state(fd, st); }
static void host_fallback_count(struct sdpshim_host *h, int reason) { h->fallback_count(reason); }
static void host_direct_attach(struct sdpshim_host *h, int fd, void *conn)
{
	if (h->size >= offsetof(struct sdpshim_host, direct_attach) + sizeof h->direct_attach && h->direct_attach != NULL)
		h->direct_attach(fd, conn);
}
static int host_has_epoll_fast(struct sdpshim_host *h)
{
	return h->size >= offsetof(struct sdpshim_host, epoll_stale) + sizeof h->epoll_stale && h->epoll_publish != NULL &&
	       h->epoll_stale != NULL;
}
static struct sdpshim_eset *host_epoll_publish(struct sdpshim_host *h, int epfd, struct sdpshim_eset *t)
{
	return h->epoll_publish(epfd, t);
}
static void host_epoll_stale(struct sdpshim_host *h, int epfd) { h->epoll_stale(epfd); }
static int host_epoll_update(struct sdpshim_host *h, int epfd, int fd, uint32_t events, uint64_t data)
{
	if (h->size < offsetof(struct sdpshim_host, epoll_update) + sizeof h->epoll_update || h->epoll_update == NULL)
		return 0;
	return h->epoll_update(epfd, fd, events, data);
}
static int host_epoll_append(struct sdpshim_host *h, int epfd, const struct sdpshim_eset_entry *e)
{
	if (h->size < offsetof(struct sdpshim_host, epoll_append) + sizeof h->epoll_append || h->epoll_append == NULL)
		return 0;
	return h->epoll_append(epfd, e);
}
static void host_fork_work(struct sdpshim_host *h, int need)
{
	if (h->size >= offsetof(struct sdpshim_host, fork_work) + sizeof h->fork_work && h->fork_work != NULL)
		h->fork_work(need);
}
static int host_has_fork_keep(struct sdpshim_host *h)
{
	return h->size >= offsetof(struct sdpshim_host, fork_keep) + sizeof h->fork_keep && h->fork_keep != NULL;
}
static void host_fork_keep(struct sdpshim_host *h, int fd, int mine) { h->fork_keep(fd, mine); }
static void host_fork_ready(struct sdpshim_host *h)
{
	if (h->size >= offsetof(struct sdpshim_host, fork_ready) + sizeof h->fork_ready && h->fork_ready != NULL)
		h->fork_ready();
}
static void host_poll_kick(struct sdpshim_host *h)
{
	if (h->size >= offsetof(struct sdpshim_host, poll_kick) + sizeof h->poll_kick && h->poll_kick != NULL)
		h->poll_kick();
}
static int host_poll_bells(struct sdpshim_host *h, int *fds, int max)
{
	if (h->size < offsetof(struct sdpshim_host, poll_bells) + sizeof h->poll_bells || h->poll_bells == NULL)
		return 0;
	return h->poll_bells(fds, max);
}
static uint32_t host_poll_bell(struct sdpshim_host *h)
{
	if (h->size < offsetof(struct sdpshim_host, poll_bell) + sizeof h->poll_bell || h->poll_bell == NULL)
		return 0;
	return h->poll_bell();
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
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
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

// EpollPublish installs a snapshot of the emulated epoll set epfd for the
// interposer's own waits (nil ents: none), and frees the one it replaces;
// false when nothing is installed (an interposer older than them, or no
// memory).
func (c cHost) EpollPublish(epfd int, ents []shim.EsetEntry, toks []uint64, kickFD, bell int) bool {
	if C.host_has_epoll_fast(c.h) == 0 {
		return false
	}
	var t *C.struct_sdpshim_eset
	if len(ents) > 0 {
		// Room for as many entries again (at least 64 more), each with
		// its token: EpollAppend fills it in place.
		capEnt := max(2*len(ents), len(ents)+64)
		capTok := len(toks) + capEnt - len(ents)
		head := C.size_t(unsafe.Sizeof(C.struct_sdpshim_eset{}))
		esz := C.size_t(unsafe.Sizeof(C.struct_sdpshim_eset_entry{}))
		words := (capEnt + 63) / 64
		mem := C.calloc(1, head+esz*C.size_t(capEnt)+8*C.size_t(capTok)+8*C.size_t(words)+4*C.size_t(capTok))
		if mem == nil {
			ents = nil
		} else {
			t = (*C.struct_sdpshim_eset)(mem)
			t.n, t.ntok, t.kick_efd, t.bell = C.uint32_t(len(ents)), C.uint32_t(len(toks)), C.int32_t(kickFD), C.uint32_t(bell)
			t.cap = C.uint32_t(capEnt)
			t.ent = (*C.struct_sdpshim_eset_entry)(unsafe.Add(mem, head))
			dst := unsafe.Slice(t.ent, len(ents))
			for i, e := range ents {
				fillEsetEntry(&dst[i], e)
			}
			at := head + esz*C.size_t(capEnt)
			t.tok = (*C.uint64_t)(unsafe.Add(mem, at))
			t.parked = (*C.uint64_t)(unsafe.Add(mem, at+8*C.size_t(capTok)))
			t.tokent = (*C.uint32_t)(unsafe.Add(mem, at+8*C.size_t(capTok)+8*C.size_t(words)))
			// The tokens (up to maxRetired retired ones among them)
			// copied at once; each entry's found by a binary search
			// (tokent, zeroed by calloc, says 0 for the others).
			copy(unsafe.Slice((*uint64)(unsafe.Pointer(t.tok)), len(toks)), toks)
			te := unsafe.Slice(t.tokent, len(toks))
			for i, e := range ents {
				if j, ok := slices.BinarySearch(toks, e.Token); ok {
					te[j] = C.uint32_t(i + 1)
				}
			}
		}
	}
	old := C.host_epoll_publish(c.h, C.int(epfd), t)
	if old == t { // not installed (no table slot)
		C.free(unsafe.Pointer(t))
		return false
	}
	if old != nil {
		C.free(unsafe.Pointer(old))
	}
	return t != nil
}

// ForkWork tells the interposer whether forks need the fork_prepare hook
// (shim's forkWorkHost).
func (c cHost) ForkWork(need bool) {
	n := C.int(0)
	if need {
		n = 1
	}
	C.host_fork_work(c.h, n)
}

// KeepsForks reports whether the interposer can keep connections across
// a fork (shim's forkKeepHost).
func (c cHost) KeepsForks() bool { return C.host_has_fork_keep(c.h) != 0 }

// ForkKeep gives the interposer the request pair of the fork about to
// happen: the child's end and the core's.
func (c cHost) ForkKeep(fd, mine int) { C.host_fork_keep(c.h, C.int(fd), C.int(mine)) }

// PollKick wakes every thread asleep in the interposer's poll engine
// over managed sockets (they look again).
func (c cHost) PollKick() { C.host_poll_kick(c.h) }

// PollBells returns the kick eventfds of the interposer's poll and select
// threads that are bells, by slot (-1: not made yet); they stay open for
// the life of the process (shim's pollBellHost).
func (c cHost) PollBells() []int {
	var fds [direct.PollBells]C.int
	n := int(C.host_poll_bells(c.h, &fds[0], C.int(len(fds))))
	out := make([]int, n)
	for i := range out {
		out[i] = int(fds[i])
	}
	return out
}

// PollBell returns the calling thread's bell in poll and select, or 0
// (shim's pollBellHost).
func (c cHost) PollBell() int { return int(C.host_poll_bell(c.h)) }

// ForkReady makes what the process's first fork would make (the core
// copy for its children), now (shim's forkReadyHost).
func (c cHost) ForkReady() { C.host_fork_ready(c.h) }

// EpollUpdate sets the events of fd's entry in epfd's fresh snapshot
// (shim.epollFastHost); false when it did nothing.
func (c cHost) EpollUpdate(epfd, fd int, events uint32, data uint64) bool {
	return C.host_has_epoll_fast(c.h) != 0 && C.host_epoll_update(c.h, C.int(epfd), C.int(fd), C.uint32_t(events), C.uint64_t(data)) != 0
}

// fillEsetEntry writes e into the C entry d.
func fillEsetEntry(d *C.struct_sdpshim_eset_entry, e shim.EsetEntry) {
	d.fd = C.int32_t(e.FD)
	d.events, d.data = C.uint32_t(e.Events), C.uint64_t(e.Data)
	d.last_mask, d.last_arr = C.uint32_t(e.LastMask), C.uint64_t(e.LastArr)
	d.last_ns, d.ns_base = C.uint32_t(e.LastNS), C.uint32_t(e.NSBase)
	d.token = C.uint64_t(e.Token)
}

// EpollAppend appends e to epfd's fresh snapshot (shim.epollFastHost);
// false when it did nothing.
func (c cHost) EpollAppend(epfd int, e shim.EsetEntry) bool {
	if C.host_has_epoll_fast(c.h) == 0 {
		return false
	}
	var d C.struct_sdpshim_eset_entry
	fillEsetEntry(&d, e)
	return C.host_epoll_append(c.h, C.int(epfd), &d) != 0
}

// EpollStale marks epfd's installed snapshot stale.
func (c cHost) EpollStale(epfd int) {
	if C.host_has_epoll_fast(c.h) != 0 {
		C.host_epoll_stale(c.h, C.int(epfd))
	}
}
