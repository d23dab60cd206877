package shim

import (
	"time"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Preemption of the CPU on the shared channel (SDPSHIM_CHANNEL=shared).
// The channel's scheduler (core/mux, sched.go) puts a waiting small
// message before the rest of a large write, but what a ping-pong and a
// bulk stream of the same processes also share is the CPU: with more
// threads wanting to run than there are cores, the small message's round
// trip waits for its threads to get a CPU while the bulk stream's copy
// without a break. The direct path gives the CPU way in preload/c/
// direct.c ("Preemption"); a stream of the shared channel takes the same
// rule from the same code, through core/direct.Preempt:
//
//   - a stream is small while its last two receives each asked for less
//     than a block's payload;
//   - a read of a small stream whose wait found its message only after
//     one of its yields gave the CPU to another thread (wait.Waiter's
//     Late) marks the process starved, and the user's tenant board too;
//   - a blocking send of a block's payload or more first passes the
//     scheduling point, which pauses while another sender's small
//     messages starved lately (of this process, or of the user's others
//     by the board's mark), sixteen times the copy since the last point.
//
// SDPSHIM_PREEMPT=0 turns it off with the channel's scheduler.

// streamPreempt is a shared-channel socket's preemption state, set before
// its stream is published (accelerateLocked) and not changed after.
type streamPreempt struct {
	on      bool // SDPSHIM_PREEMPT, on a stream of the shared channel
	payload int  // a block's payload: less is a small receive, as much or more a bulk send
	board   int  // the user's tenant board (tenants.go), -1: none
	pre     direct.Preempt
}

// preemptStreamLocked sets s's preemption up for st, a stream of the
// shared channel (a direct stream has its own in the handle), opening the
// user's tenant board on the process's first. Before st is published.
//
// +checklocks:s.mu
func (s *Socket) preemptStreamLocked(st dataStream) {
	if _, isDirect := st.(*directStream); isDirect || !s.p.cfg.Preempt {
		return
	}
	s.spre.on = true
	s.spre.payload = s.p.cfg.BlockSize - wire.HeaderSize
	s.spre.board = s.p.board()
	s.rdWait.Late = s.lateRead
}

// noteRecv records a receive asking for want bytes.
func (s *Socket) noteRecv(want int) {
	if s.spre.on {
		s.spre.pre.Receive(want)
	}
}

// lateRead is the read waiter's Late: a message came late for the CPU,
// which marks the process when the stream is small.
func (s *Socket) lateRead() { s.spre.pre.Late(s.spre.board, s.spre.payload) }

// bulkPoint is the scheduling point before a blocking send of left bytes:
// it pauses while small messages starve (a bulk send only) and returns
// the function that times the write's copy, nil when it is not to be
// timed.
func (s *Socket) bulkPoint(left int) func(n int) {
	if !s.spre.on || left < s.spre.payload || !s.spre.pre.Point(s.spre.board) {
		return nil
	}
	t0 := time.Now()
	return func(n int) {
		if n > 0 {
			s.spre.pre.Copied(time.Since(t0), n)
		}
	}
}
