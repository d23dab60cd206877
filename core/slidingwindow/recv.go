package slidingwindow

import (
	"errors"
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// receiver is the receiving side's state. Blocks k in [tail, delivered)
// were returned by Receive and not yet freed in order; released marks
// those of them released early. Blocks in [delivered, arrived) wait to be
// returned; lens holds the length each one's immediate announced.
type receiver struct {
	arrived, delivered, tail uint64
	acked                    uint64 // the tail last acknowledged
	peerFull                 bool   // the peer said it is full, no acknowledgement since
	released                 []bool
	lens                     []uint32
}

func (r *receiver) init(n int) {
	r.released = make([]bool, n)
	r.lens = make([]uint32, n)
}

// Receive returns the oldest arrived block not yet returned, or ok=false
// when none has arrived. Once the peer closed (or died) and every arrived
// block was returned it reports the end, an error wrapping
// wire.ErrPeerGone; a protocol violation is reported at once.
func (t *Transport) Receive() (wire.Block, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drainLocked()
	r := &t.rcv
	if t.bad || t.cq.closed || r.delivered == r.arrived { // closed: the ring is unmapped
		return wire.Block{}, false, t.err
	}
	slot := int(r.delivered % uint64(t.n))
	blk := t.ringM[slot*t.size : (slot+1)*t.size]
	h, err := wire.DecodeHeader(blk, t.maxPay)
	if err == nil && h.Len != r.lens[slot] {
		err = fmt.Errorf("header length %d, immediate %d: %w", h.Len, r.lens[slot], wire.ErrProtocol)
	}
	if err != nil {
		t.failLocked(fmt.Errorf("slidingwindow: block %d: %w", r.delivered, err), true)
		return wire.Block{}, false, t.err
	}
	r.delivered++
	t.stats.received.Add(1)
	t.maybeAckLocked()
	end := wire.HeaderSize + int(h.Len)
	return wire.Block{BlockHeader: h, Payload: blk[wire.HeaderSize:end:end], Index: slot}, true, nil
}

// Release frees a block Receive returned. The ring's space comes back only
// in order: a block released before an older one is held until the older
// one is released too. Releasing a block twice, or one not returned, is
// ignored.
func (t *Transport) Release(b wire.Block) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.rcv
	n := uint64(t.n)
	if t.bad || t.cq.closed || b.Index < 0 || b.Index >= t.n {
		return
	}
	// The returned, unfreed block in slot b.Index, if any, is tail+k.
	k := (uint64(b.Index) + n - r.tail%n) % n
	if r.tail+k >= r.delivered || r.released[b.Index] {
		return
	}
	r.released[b.Index] = true
	t.stats.released.Add(1)
	for r.tail < r.delivered && r.released[r.tail%n] {
		r.released[r.tail%n] = false
		r.tail++
	}
	t.maybeAckLocked()
}

// maybeAckLocked acknowledges the tail when the policy says so (see the
// package documentation): ackEvery blocks freed, or the peer full and
// nothing left for Receive to return.
//
// +checklocks:t.mu
func (t *Transport) maybeAckLocked() {
	r := &t.rcv
	pending := r.tail - r.acked
	if pending == 0 || t.err != nil {
		return
	}
	if pending < uint64(t.ackEvery) && !(r.peerFull && r.delivered == r.arrived) {
		return
	}
	if !t.sendMsgLocked(msgAck, uint32(r.tail)) {
		return
	}
	r.acked, r.peerFull = r.tail, false
	t.stats.acksSent.Add(1)
}

// sendMsgLocked posts one message as an inline SEND. A full send queue
// (the peer takes no receives for now) reports false and leaves the
// message to a later call; any other failure ends the transport.
//
// +checklocks:t.mu
func (t *Transport) sendMsgLocked(kind byte, value uint32) bool {
	off := t.scratchOff()
	encodeMsg(t.local.Bytes()[off:], kind, value)
	t.rr[0] = verbs.SGE{Key: t.local.LocalKey(), Offset: uint64(off), Length: msgSize}
	t.msgWR = verbs.SendRequest{Op: verbs.OpSend, Flags: verbs.SendInline, SGEs: t.rr[:]}
	err := t.link.PostBell(&t.msgWR)
	switch {
	case err == nil:
		return true
	case errors.Is(err, verbs.ErrQueueFull):
		return false
	}
	t.failLocked(fmt.Errorf("slidingwindow: send message: %w", err), false)
	return false
}
