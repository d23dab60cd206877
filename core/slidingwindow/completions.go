package slidingwindow

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// cqState is the receive completion queue's consumer: one goroutine at a
// time, under Transport.mu.
type cqState struct {
	closed bool
	gen    [numBells]uint64 // data arrivals, tail moves
	buf    [32]verbs.Completion
	repost verbs.RecvRequest
	sge    [1]verbs.SGE
}

// poll takes the queued completions: with wait it waits for the lock, else
// it skips when another goroutine holds it (that one takes them).
func (t *Transport) poll(wait bool) {
	if wait {
		t.mu.Lock()
	} else if !t.mu.TryLock() {
		return
	}
	t.drainLocked()
	t.mu.Unlock()
}

// drainLocked takes every queued completion, applies it, reposts its
// receive and wakes the sleepers when anything changed.
//
// +checklocks:t.mu
func (t *Transport) drainLocked() {
	c := &t.cq
	if c.closed {
		return
	}
	changed := false
	for {
		n, err := t.link.BellRecvCQ.Poll(c.buf[:])
		for i := range c.buf[:n] {
			changed = true
			if t.completionLocked(&c.buf[i]) {
				t.repostLocked(c.buf[i].ID)
			}
		}
		if err != nil {
			changed = true
			t.failLocked(fmt.Errorf("slidingwindow: poll: %w (%w)", err, wire.ErrPeerGone), false)
		}
		if n < len(c.buf) || err != nil {
			break
		}
	}
	if changed {
		t.slp.broadcastLocked()
	}
}

// completionLocked applies one receive completion and reports whether its
// receive should be posted again.
//
// +checklocks:t.mu
func (t *Transport) completionLocked(c *verbs.Completion) bool {
	violation := func(format string, args ...any) bool {
		t.failLocked(fmt.Errorf("slidingwindow: "+format+": %w", append(args, wire.ErrProtocol)...), true)
		return false
	}
	switch {
	case c.Status == verbs.StatusLocalLength:
		return violation("the peer sent a message longer than %d bytes", msgSize)
	case c.Status != verbs.StatusSuccess:
		t.failLocked(fmt.Errorf("slidingwindow: receive: %v: %w", c.Status, wire.ErrPeerGone), false)
		return false
	case c.ID >= uint64(t.rings):
		return violation("completion for unknown receive %d", c.ID)
	case t.bad:
		return false
	case c.Op == verbs.OpRecvWithImm && c.HasImm:
		return t.arrivalLocked(c)
	case c.Op == verbs.OpRecv && !c.HasImm:
		return t.messageLocked(c)
	}
	return violation("unexpected %v completion (immediate %v)", c.Op, c.HasImm)
}

// arrivalLocked checks and records a block's WRITE_WITH_IMM.
//
// +checklocks:t.mu
func (t *Transport) arrivalLocked(c *verbs.Completion) bool {
	r := &t.rcv
	seq, n, full := decodeImm(c.Imm)
	var why string
	switch {
	case seq != uint32(r.arrived)&immSeqMask:
		why = fmt.Sprintf("announces block %d (mod %d)", seq, immSeqMask+1)
	case n > t.maxPay:
		why = fmt.Sprintf("announces %d bytes, over %d", n, t.maxPay)
	case c.ByteLen != uint32(wire.HeaderSize+n):
		why = fmt.Sprintf("announces %d bytes but wrote %d", n, c.ByteLen)
	case r.arrived-r.tail >= uint64(t.n):
		why = fmt.Sprintf("lands in a slot not yet released (%d blocks unreleased)", r.arrived-r.tail)
	}
	if why != "" {
		t.failLocked(fmt.Errorf("slidingwindow: write with immediate %#x for block %d %s: %w",
			c.Imm, r.arrived, why, wire.ErrProtocol), true)
		return false
	}
	r.lens[r.arrived%uint64(t.n)] = uint32(n)
	r.arrived++
	r.peerFull = r.peerFull || full
	t.cq.gen[bellData]++
	return true
}

// messageLocked applies an acknowledgement or the farewell.
//
// +checklocks:t.mu
func (t *Transport) messageLocked(c *verbs.Completion) bool {
	if c.ByteLen != msgSize {
		t.failLocked(fmt.Errorf("slidingwindow: message of %d bytes: %w", c.ByteLen, wire.ErrProtocol), true)
		return false
	}
	off := t.landOff(int(c.ID))
	kind, value, err := decodeMsg(t.local.Bytes()[off : off+msgSize])
	if err != nil {
		t.failLocked(err, true)
		return false
	}
	if kind == msgClose {
		t.failLocked(fmt.Errorf("slidingwindow: closed by the peer: %w", wire.ErrPeerGone), false)
		return false
	}
	tail, err := advance(t.tail.Load(), t.sent.Load(), value)
	if err != nil {
		t.failLocked(err, true)
		return false
	}
	t.tail.Store(tail)
	t.cq.gen[bellSpace]++
	t.stats.acksReceived.Add(1)
	return true
}

// repostLocked posts receive id again.
//
// +checklocks:t.mu
func (t *Transport) repostLocked(id uint64) {
	c := &t.cq
	c.sge[0] = verbs.SGE{Key: t.local.LocalKey(), Offset: uint64(t.landOff(int(id))), Length: msgSize}
	c.repost = verbs.RecvRequest{ID: id, SGEs: c.sge[:]}
	if _, err := t.link.Bell.PostRecv(&c.repost); err != nil {
		t.failLocked(fmt.Errorf("slidingwindow: post receive: %w (%w)", err, wire.ErrPeerGone), false)
	}
}
