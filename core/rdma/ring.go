package rdma

import "github.com/sdpshim/sdpshim/core/verbs"

// workRing accounts for the outstanding requests of one work queue. The
// wr_id given to verbs is not the caller's ID but the request's sequence
// number on its queue (with recvTag for receive queues), so that
//
//   - the queue is full at exactly the caller's MaxSend/MaxRecv, whatever
//     the device rounded its own queue up to;
//   - a completion names its request even when the caller reuses IDs,
//     and retires every earlier request with it (unsignaled requests that
//     succeeded produce no completion of their own);
//   - an error completion, whose opcode verbs leaves undefined, still
//     reports the request's opcode.
//
// Completions of one work queue arrive in post order (RC). The ring is
// guarded by its queue pair's lock for that queue.
type workRing struct {
	slots []ringSlot
	head  uint64 // sequence number of the oldest outstanding request
	tail  uint64 // sequence number of the next request posted
}

// ringSlot is what a completion needs to become a verbs.Completion.
type ringSlot struct {
	id uint64       // the caller's wr_id
	op verbs.Opcode // the request's opcode (OpRecv on a receive queue)
	// hint is the status translate.go predicted for a request whose SGEs
	// it could not map (StatusLocalLength for an SGE outside its region);
	// StatusSuccess otherwise. See refineStatus.
	hint verbs.Status
}

// recvTag marks the wr_id of a receive request, so a completion queue
// shared by both queues of a queue pair tells them apart even on error
// completions.
const recvTag = 1 << 63

func newWorkRing(depth int) workRing { return workRing{slots: make([]ringSlot, depth)} }

// free returns how many more requests fit.
func (r *workRing) free() int { return len(r.slots) - int(r.tail-r.head) }

// outstanding returns how many requests have not completed.
func (r *workRing) outstanding() int { return int(r.tail - r.head) }

// push records a request and returns its sequence number. The caller
// checked free() > 0.
func (r *workRing) push(s ringSlot) uint64 {
	seq := r.tail
	r.slots[seq%uint64(len(r.slots))] = s
	r.tail++
	return seq
}

// unpush forgets the last n requests pushed: verbs refused them.
func (r *workRing) unpush(n int) { r.tail -= uint64(n) }

// complete retires every request up to and including seq and returns the
// slot of seq. It returns false for a sequence number that is not
// outstanding (a completion that does not belong to this queue).
func (r *workRing) complete(seq uint64) (ringSlot, bool) {
	if seq < r.head || seq >= r.tail {
		return ringSlot{}, false
	}
	s := r.slots[seq%uint64(len(r.slots))]
	r.head = seq + 1
	return s, true
}

// refineStatus corrects a device status with the hint recorded at post
// time: a device reports an SGE outside its memory region as a local
// protection error, where the contract names StatusLocalLength.
func refineStatus(st, hint verbs.Status) verbs.Status {
	if st == verbs.StatusLocalProtection && hint == verbs.StatusLocalLength {
		return hint
	}
	return st
}
