package slidingwindow

import (
	"errors"
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// sender is the sending side's state.
type sender struct {
	head uint64 // blocks written
	wr   verbs.SendRequest
	sge  [1]verbs.SGE
}

// TrySend writes one block if the ring has a free slot as of the last
// acknowledgement (taking the acknowledgements queued first, and once
// more when the ring looks full). Payloads over MaxPayload and headers
// that fail wire.BlockHeader.Validate are the caller's error
// (verbs.ErrInvalid).
func (t *Transport) TrySend(hdr wire.BlockHeader, payload []byte) (bool, error) {
	if len(payload) > t.maxPay {
		return false, fmt.Errorf("slidingwindow: payload of %d bytes over %d: %w", len(payload), t.maxPay, verbs.ErrInvalid)
	}
	hdr.Len = uint32(len(payload))
	if err := hdr.Validate(t.maxPay); err != nil {
		return false, fmt.Errorf("slidingwindow: send: %v: %w", err, verbs.ErrInvalid)
	}
	t.smu.Lock()
	defer t.smu.Unlock()
	t.poll(false)
	if err := t.failed(); err != nil {
		return false, err
	}
	s := &t.snd
	tail := t.tail.Load()
	if s.head-tail >= uint64(t.n) {
		t.poll(true)
		if err := t.failed(); err != nil {
			return false, err
		}
		if tail = t.tail.Load(); s.head-tail >= uint64(t.n) {
			t.stats.full.Add(1)
			return false, nil
		}
	}
	return t.writeLocked(hdr, payload, s.head+1-tail == uint64(t.n))
}

// writeLocked stages block head and posts its WRITE_WITH_IMM.
//
// +checklocks:t.smu
func (t *Transport) writeLocked(hdr wire.BlockHeader, payload []byte, full bool) (bool, error) {
	s := &t.snd
	slot := int(s.head % uint64(t.n))
	off := t.stageOff(slot)
	st := t.local.Bytes()[off : off+t.size]
	hdr.Encode(st)
	m := wire.HeaderSize + copy(st[wire.HeaderSize:], payload)
	s.sge[0] = verbs.SGE{Key: t.local.LocalKey(), Offset: uint64(off), Length: uint32(m)}
	s.wr = verbs.SendRequest{Op: verbs.OpWriteWithImm, SGEs: s.sge[:], Imm: encodeImm(s.head, len(payload), full),
		RemoteAddr: t.peer.At(uint64(slot * t.size)), RemoteKey: t.peer.Key}
	t.sent.Store(s.head + 1)
	if err := t.link.PostBell(&s.wr); err != nil {
		t.sent.Store(s.head)
		if errors.Is(err, verbs.ErrQueueFull) { // the peer is slow to take acknowledgements
			t.stats.full.Add(1)
			return false, nil
		}
		t.mu.Lock()
		t.failLocked(fmt.Errorf("slidingwindow: write block: %w", err), false)
		err = t.err
		t.mu.Unlock()
		return false, err
	}
	s.head++
	t.stats.sent.Add(1)
	return true, nil
}

// Refresh takes the acknowledgements queued now. An error is final.
func (t *Transport) Refresh() error {
	t.poll(true)
	return t.failed()
}
