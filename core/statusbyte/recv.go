package statusbyte

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/wire"
)

// receiver is the receiving side's state. mine holds, per block, the
// status value this side expects to find when nothing new arrived: 0 for
// a free block, 1 for one handed out, 2 for one retained. It is padded to
// the status array's length so the scan compares eight blocks at a time.
type receiver struct {
	mine  []byte
	hint  int // block after the last arrival found
	err   error
	empty int // empty scans since the last link check
}

func (r *receiver) init(n int) { r.mine = make([]byte, roundUp(n, align)) }

func (r *receiver) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Receive returns an arrived block not yet returned, scanning the status
// bytes from the block after the last arrival, or ok=false when none has
// arrived. Once the peer closed (or died) and every arrived block was
// returned, it reports the end: an error wrapping wire.ErrPeerGone.
func (t *Transport) Receive() (wire.Block, bool, error) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	r := &t.rcv
	if r.err != nil {
		return wire.Block{}, false, r.err
	}
	closed := t.bells.PeerClosed() // before the scan: the peer wrote its blocks first
	i, err := t.scanLocked()
	if err != nil {
		r.fail(err)
		return wire.Block{}, false, err
	}
	if i >= 0 {
		return t.takeLocked(i)
	}
	if closed {
		r.fail(fmt.Errorf("statusbyte: closed by the peer: %w", wire.ErrPeerGone))
		return wire.Block{}, false, r.err
	}
	if r.empty++; r.empty >= 64 {
		r.empty = 0
		if err := t.link.Err(); err != nil {
			r.fail(fmt.Errorf("statusbyte: %w", err))
			return wire.Block{}, false, r.err
		}
	}
	return wire.Block{}, false, nil
}

// scanLocked returns a block whose status shows an arrival, or -1. A
// status value the protocol does not allow for the block is an error.
//
// +checklocks:t.rmu
func (t *Transport) scanLocked() (int, error) {
	r := &t.rcv
	n := t.lay.blocks
	words := len(r.mine) / 8
	w0 := r.hint / 8
	for k := 0; k <= words; k++ {
		w := w0 + k
		if w >= words {
			w -= words
		}
		got := sharedmem.Uint64At(t.status, 8*w).Load()
		if got == leWord(r.mine[8*w:]) {
			continue
		}
		for j := 8 * w; j < 8*w+8 && j < len(r.mine); j++ {
			if k == 0 && j < r.hint { // the first word is scanned again last
				continue
			}
			v := byte(got >> (8 * (j - 8*w)))
			if v == r.mine[j] {
				continue
			}
			if j >= n || v != 1 || r.mine[j] != 0 {
				return -1, fmt.Errorf("statusbyte: status byte %d is %d, this side expects %d: %w", j, v, r.mine[j], wire.ErrProtocol)
			}
			return j, nil
		}
	}
	return -1, nil
}

// takeLocked decodes the header of block i and hands the block out.
//
// +checklocks:t.rmu
func (t *Transport) takeLocked(i int) (wire.Block, bool, error) {
	r := &t.rcv
	blk := t.blocksM[i*t.lay.size : (i+1)*t.lay.size]
	h, err := wire.DecodeHeader(blk, t.maxPay)
	if err != nil {
		r.fail(fmt.Errorf("statusbyte: block %d: %w", i, err))
		return wire.Block{}, false, r.err
	}
	r.mine[i] = slotBusy
	r.hint = i + 1
	if r.hint == t.lay.blocks {
		r.hint = 0
	}
	t.stats.received.Add(1)
	return wire.Block{BlockHeader: h, Payload: blk[wire.HeaderSize : wire.HeaderSize+int(h.Len) : wire.HeaderSize+int(h.Len)], Index: i}, true, nil
}

// Release frees a block this side received (retained or not) and rings
// the peer's space bell if it sleeps. Releasing a block twice, or one not
// received, is ignored.
func (t *Transport) Release(b wire.Block) {
	t.rmu.Lock()
	r := &t.rcv
	if r.err != nil && t.closed.Load() || b.Index < 0 || b.Index >= t.lay.blocks || r.mine[b.Index] == slotFree {
		t.rmu.Unlock()
		return
	}
	r.mine[b.Index] = slotFree
	sharedmem.StoreByte(t.status, b.Index, slotFree)
	t.rmu.Unlock()
	t.stats.released.Add(1)
	if err := t.bells.Ring(bellSpace); err != nil {
		t.rmu.Lock()
		r.fail(err)
		t.rmu.Unlock()
	}
}

// Retain marks a received block retained (status 2): the sender skips it
// and sees, at its next status READ, that the block's stream is not read.
func (t *Transport) Retain(b wire.Block) {
	t.rmu.Lock()
	defer t.rmu.Unlock()
	r := &t.rcv
	if r.err != nil && t.closed.Load() || b.Index < 0 || b.Index >= t.lay.blocks || r.mine[b.Index] != slotBusy {
		return
	}
	r.mine[b.Index] = slotRetained
	sharedmem.StoreByte(t.status, b.Index, slotRetained)
}

// leWord reads 8 bytes of private memory as a little-endian word.
func leWord(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
