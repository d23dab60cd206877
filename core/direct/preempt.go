package direct

/*
#include "../../preload/c/direct.h"

// Whether a receiver whose last two receives asked for prev - 1 and
// last - 1 bytes (0: none yet) is small (sdp_preempt_note's rule), and if
// so the process's starved mark for sender by: one crossing, made only
// when a wait lost the CPU.
static int starved_if_small(uintptr_t by, uint64_t prev, uint64_t last, uint64_t block, int board_fd)
{
	uint32_t hist = 0;
	if (prev == 0 || last == 0)
		return 0;
	sdp_preempt_note(&hist, prev - 1, block);
	if (!sdp_preempt_note(&hist, last - 1, block))
		return 0;
	sdp_preempt_starved(by, board_fd, sdp_dconn_pid());
	return 1;
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
// small message came late (Receive, Late); its blocking bulk writes pause
// at their scheduling points while another sender's small messages
// starve (Point, Copied), as a handle's do. The zero value is ready; a
// Preempt must not be copied after first use (its address names the
// sender).
type Preempt struct {
	copyNS, copyBytes int64  // the copy since the last scheduling point, while starved
	pauses            uint64 // the pauses so far
	// The last two receives' requests, plus one (0: none): kept as they
	// come, judged by the protocol's rule only when a wait was late.
	prev, last atomic.Uint64
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
// none), starved lately, for sixteen times the copy timed since the last
// point (at most 2 ms). It reports whether the write's copy is to be
// timed and given to Copied. The pointers passed hold no Go pointer and
// are not kept.
func (p *Preempt) Point(boardFD int) bool {
	return C.sdp_preempt_point(p.id(), C.int(boardFD), C.sdp_dconn_pid(), (*C.int64_t)(unsafe.Pointer(&p.copyNS)),
		(*C.int64_t)(unsafe.Pointer(&p.copyBytes)), (*C.uint64_t)(unsafe.Pointer(&p.pauses))) != 0
}

// Copied adds a timed write's copy: n bytes in d.
func (p *Preempt) Copied(d time.Duration, n int) {
	atomic.AddInt64(&p.copyNS, int64(d))
	atomic.AddInt64(&p.copyBytes, int64(n))
}

// Receive records a receive asking for want bytes (written only when it
// differs from the last: the data path pays a load and a compare).
func (p *Preempt) Receive(want int) {
	if w := uint64(want) + 1; p.last.Load() != w || p.prev.Load() != w {
		p.prev.Store(p.last.Load())
		p.last.Store(w)
	}
}

// Late is for a wait of this sender's reader that found its message only
// after it lost the CPU: when the receiver is small (its last two
// receives each asked for less than a block of block payload bytes), it
// marks the process starved by this sender, and the tenant board boardFD
// too (-1: none), for the user's other processes, at most every 5 ms.
// It reports whether it marked.
func (p *Preempt) Late(boardFD, block int) bool {
	return C.starved_if_small(p.id(), C.uint64_t(p.prev.Load()), C.uint64_t(p.last.Load()), C.uint64_t(block), C.int(boardFD)) != 0
}

// Pauses is how many times Point paused.
func (p *Preempt) Pauses() uint64 { return atomic.LoadUint64(&p.pauses) }
