package statusbyte

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Slot states of the sender's view, equal to the status values the
// receiver may show.
const (
	slotFree     = 0
	slotBusy     = 1
	slotRetained = 2
)

// sender is the sending side's view of the peer's blocks.
type sender struct {
	view     []byte   // slotFree, slotBusy, slotRetained per block
	streamOf []uint32 // stream last written to each block
	held     map[uint32]int
	retained map[uint32]int
	free     int // blocks the view shows free
	cursor   int
	err      error
	wr       [2]verbs.SendRequest
	sge      [2][1]verbs.SGE
}

func (s *sender) init(n int) {
	s.view = make([]byte, n)
	s.streamOf = make([]uint32, n)
	s.held = make(map[uint32]int)
	s.retained = make(map[uint32]int)
	s.free = n
}

func (s *sender) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// freeSlot returns a block the view shows free, searching from the cursor,
// or -1; it counts the retained blocks it passed over.
func (s *sender) freeSlot(t *Transport) int {
	n := len(s.view)
	for k := 0; k < n; k++ {
		i := s.cursor + k
		if i >= n {
			i -= n
		}
		switch s.view[i] {
		case slotFree:
			return i
		case slotRetained:
			t.stats.skipped.Add(1)
		}
	}
	return -1
}

// TrySend writes one block if the view (refreshed once when it shows no
// room) has a free block. Payloads over MaxPayload and headers that fail
// wire.BlockHeader.Validate are the caller's error (verbs.ErrInvalid).
func (t *Transport) TrySend(hdr wire.BlockHeader, payload []byte) (bool, error) {
	if len(payload) > t.maxPay {
		return false, fmt.Errorf("statusbyte: payload of %d bytes over %d: %w", len(payload), t.maxPay, verbs.ErrInvalid)
	}
	hdr.Len = uint32(len(payload))
	if err := hdr.Validate(t.maxPay); err != nil {
		return false, fmt.Errorf("statusbyte: send: %v: %w", err, verbs.ErrInvalid)
	}
	t.smu.Lock()
	s := &t.snd
	if s.err != nil {
		t.smu.Unlock()
		return false, s.err
	}
	i := s.freeSlot(t)
	if i < 0 {
		if err := t.refreshLocked(); err != nil {
			t.smu.Unlock()
			return false, err
		}
		if i = s.freeSlot(t); i < 0 {
			t.smu.Unlock()
			t.stats.full.Add(1)
			return false, nil
		}
	}
	if err := t.writeLocked(i, hdr, payload); err != nil {
		t.smu.Unlock()
		return false, err
	}
	t.smu.Unlock()
	t.stats.sent.Add(1)
	if err := t.bells.Ring(bellData); err != nil {
		t.failSend(err)
		return true, err
	}
	return true, nil
}

// writeLocked stages block i and posts its data WRITE and status WRITE,
// waiting until both are visible at the peer (Ring needs that, and the
// staging block is free again once they completed).
//
// +checklocks:t.smu
func (t *Transport) writeLocked(i int, hdr wire.BlockHeader, payload []byte) error {
	s := &t.snd
	l := &t.lay
	off := l.stageOff
	st := t.local.Bytes()[off : off+l.size]
	hdr.Encode(st)
	n := wire.HeaderSize + copy(st[wire.HeaderSize:], payload)
	key := t.local.LocalKey()
	s.sge[0][0] = verbs.SGE{Key: key, Offset: uint64(off), Length: uint32(n)}
	s.sge[1][0] = verbs.SGE{Key: key, Offset: uint64(l.oneOff), Length: 1}
	s.wr[0] = verbs.SendRequest{Op: verbs.OpWrite, SGEs: s.sge[0][:],
		RemoteAddr: t.peer.At(uint64(l.blocksOff + i*l.size)), RemoteKey: t.peer.Key, Next: &s.wr[1]}
	s.wr[1] = verbs.SendRequest{Op: verbs.OpWrite, Flags: verbs.SendInline, SGEs: s.sge[1][:],
		RemoteAddr: t.peer.At(uint64(l.statusOff + i)), RemoteKey: t.peer.Key}
	if err := t.link.PostData(&s.wr[0], true); err != nil {
		s.fail(fmt.Errorf("statusbyte: write block: %w", err))
		return s.err
	}
	s.view[i] = slotBusy
	s.free--
	s.streamOf[i] = hdr.Stream
	s.held[hdr.Stream]++
	s.cursor = i + 1
	if s.cursor == len(s.view) {
		s.cursor = 0
	}
	return nil
}

// refreshLocked READs the peer's status array and folds it into the view.
//
// +checklocks:t.smu
func (t *Transport) refreshLocked() error {
	s := &t.snd
	l := &t.lay
	s.sge[0][0] = verbs.SGE{Key: t.local.LocalKey(), Offset: uint64(l.readOff), Length: uint32(l.blocks)}
	s.wr[0] = verbs.SendRequest{Op: verbs.OpRead, SGEs: s.sge[0][:],
		RemoteAddr: t.peer.At(uint64(l.statusOff)), RemoteKey: t.peer.Key}
	if err := t.link.PostData(&s.wr[0], true); err != nil {
		s.fail(fmt.Errorf("statusbyte: read status: %w", err))
		return s.err
	}
	t.stats.reads.Add(1)
	got := t.local.Bytes()[l.readOff : l.readOff+l.blocks]
	for i, v := range got {
		if err := s.apply(i, v); err != nil {
			s.fail(err)
			return err
		}
	}
	return nil
}

// apply folds status v of block i into the view. The receiver may only
// move a block it was given (busy) to retained or free, and a retained
// one to free.
func (s *sender) apply(i int, v byte) error {
	was := s.view[i]
	if v == was {
		return nil
	}
	stream := s.streamOf[i]
	switch {
	case v == slotFree:
		s.free++
		if s.held[stream]--; s.held[stream] <= 0 {
			delete(s.held, stream)
		}
		if was == slotRetained {
			if s.retained[stream]--; s.retained[stream] <= 0 {
				delete(s.retained, stream)
			}
		}
	case v == slotRetained && was == slotBusy:
		s.retained[stream]++
	default:
		return fmt.Errorf("statusbyte: peer shows status %d for block %d, which this side holds as %d: %w",
			v, i, was, wire.ErrProtocol)
	}
	s.view[i] = v
	return nil
}

// Retained reports whether the peer retained a block of stream at the
// last status READ.
func (t *Transport) Retained(stream uint32) bool {
	t.smu.Lock()
	defer t.smu.Unlock()
	return t.snd.retained[stream] > 0
}

// Held returns the blocks of stream not seen released and whether one of
// them is retained (wire.BlockCounter).
func (t *Transport) Held(stream uint32) (int, bool) {
	t.smu.Lock()
	defer t.smu.Unlock()
	return t.snd.held[stream], t.snd.retained[stream] > 0
}

// Free returns the blocks the view shows free (wire.BlockCounter).
func (t *Transport) Free() int {
	t.smu.Lock()
	defer t.smu.Unlock()
	return t.snd.free
}

// Refresh READs the peer's status array now (wire.BlockCounter).
func (t *Transport) Refresh() error {
	t.smu.Lock()
	defer t.smu.Unlock()
	if t.snd.err != nil {
		return t.snd.err
	}
	return t.refreshLocked()
}

func (t *Transport) failSend(err error) {
	t.smu.Lock()
	t.snd.fail(err)
	t.smu.Unlock()
}
