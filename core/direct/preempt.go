package direct

/*
#include "../../preload/c/direct.h"
#include "../../preload/c/tenant.h"

// The board's mark (as fresh as a millisecond), then the scheduling
// point: one crossing.
static int preempt_point_board(uintptr_t by, int board_fd, int64_t *copy_ns, int64_t *copy_bytes, uint64_t *pauses)
{
	sdp_tenant_peek(board_fd, sdp_dconn_pid(), sdp_now_ns());
	return sdp_preempt_point(by, copy_ns, copy_bytes, pauses);
}
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// Preempt is the CPU preemption of preload/c/direct.c ("Preemption") for
// a sender that is not a handle's: a stream of the shared channel, whose
// bytes the Go core copies. Its reads mark the process starved when a
// small message came late (Starved); its blocking bulk writes pause at
// their scheduling points while another sender's small messages starve
// (Point, Copied), as a handle's do. The zero value is ready; a Preempt
// must not be copied after first use (its address names the sender).
type Preempt struct {
	copyNS, copyBytes int64  // the copy since the last scheduling point, while starved
	pauses            uint64 // the pauses so far
	hist              uint32 // the last two receives (sdp_preempt_note)
}

// yieldRanOther is the protocol's SDP_YIELD_RAN_OTHER_NS: a yield that
// took this long gave the CPU to another thread.
const yieldRanOther = time.Duration(C.SDP_YIELD_RAN_OTHER_NS)

// id names the sender to the C side: its own small reads do not pause
// its own writes.
func (p *Preempt) id() C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(p))) }

// Point is the scheduling point before a blocking bulk write: it pauses
// while a small message of another sender of this process, or of
// another process of the user (the mark on the tenant board boardFD, -1:
// none, read at most every millisecond), starved lately, for eight times
// the copy timed since the last point (at most 2 ms). It reports whether
// the write's copy is to be timed and given to Copied. The pointers
// passed hold no Go pointer and are not kept.
func (p *Preempt) Point(boardFD int) bool {
	return C.preempt_point_board(p.id(), C.int(boardFD), (*C.int64_t)(unsafe.Pointer(&p.copyNS)),
		(*C.int64_t)(unsafe.Pointer(&p.copyBytes)), (*C.uint64_t)(unsafe.Pointer(&p.pauses))) != 0
}

// Copied adds a timed write's copy: n bytes in d.
func (p *Preempt) Copied(d time.Duration, n int) {
	atomic.AddInt64(&p.copyNS, int64(d))
	atomic.AddInt64(&p.copyBytes, int64(n))
}

// Receive records a receive asking for want bytes, with blocks of block
// payload bytes, and reports whether the receiver is small now (its last
// two receives each asked for less than a block: it reads small
// messages). Receives of one stream are made one at a time.
func (p *Preempt) Receive(want, block int) bool {
	return C.sdp_preempt_note((*C.uint32_t)(unsafe.Pointer(&p.hist)), C.uint64_t(want), C.uint64_t(block)) != 0
}

// Pauses is how many times Point paused.
func (p *Preempt) Pauses() uint64 { return atomic.LoadUint64(&p.pauses) }

// Starved marks the process starved by this sender's reader: a small
// message it waited for came late after its wait lost the CPU. The mark
// goes onto the tenant board boardFD too (-1: none), for the user's other
// processes, at most every 5 ms.
func (p *Preempt) Starved(boardFD int) {
	C.sdp_preempt_starved(p.id(), C.int(boardFD), C.sdp_dconn_pid())
}
