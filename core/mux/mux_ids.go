package mux

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// streamIDs allocates this side's stream ids (odd on the initiator, even
// on the other side) and tracks which of the peer's ids exist, were never
// seen yet, or are gone. The peer allocates in increasing order, but its
// first blocks may arrive out of order, so ids below the highest seen
// that have not arrived yet are kept as gaps (bounded: a peer cannot have
// more streams in flight than the transport has blocks).
type streamIDs struct {
	next    uint32 // this side's next id
	peerMax uint32 // highest peer id seen (0: none)
	peerOdd bool
	gaps    map[uint32]struct{}
	maxGaps int
	exhaust bool
}

const maxStreamGaps = 4096

func (d *streamIDs) init(initiator bool) {
	d.next, d.peerOdd = 2, true
	if initiator {
		d.next, d.peerOdd = 1, false
	}
	d.gaps = make(map[uint32]struct{})
	d.maxGaps = maxStreamGaps
}

// alloc returns a fresh id for a stream this side opens.
func (d *streamIDs) alloc() (uint32, error) {
	if d.exhaust {
		return 0, fmt.Errorf("channel: stream ids exhausted: %w", verbs.ErrBusy)
	}
	id := d.next
	if d.next += 2; d.next < id {
		d.exhaust = true
	}
	return id, nil
}

// idClass says what an id names.
type idClass uint8

const (
	idGone  idClass = iota // a stream that existed and was deleted: drop its blocks
	idNew                  // the peer opened a stream: create it
	idBogus                // no stream ever had it: protocol violation
)

// classify decides what an id that is not a live stream names; for idNew
// it records the stream as seen.
func (d *streamIDs) classify(id uint32) (idClass, error) {
	if id == 0 {
		return idBogus, fmt.Errorf("stream id 0: %w", wire.ErrProtocol)
	}
	if (id&1 == 1) != d.peerOdd {
		if id >= d.next && !d.exhaust {
			return idBogus, fmt.Errorf("block for stream %d, which this side never opened: %w", id, wire.ErrProtocol)
		}
		return idGone, nil
	}
	if id > d.peerMax {
		low := uint32(2) // the peer's first id
		if d.peerOdd {
			low = 1
		}
		missing := uint64(id-low) / 2
		if d.peerMax != 0 {
			missing = uint64(id-d.peerMax)/2 - 1
		}
		if missing > uint64(d.maxGaps-len(d.gaps)) {
			return idBogus, fmt.Errorf("peer jumped to stream %d (highest so far %d): %w", id, d.peerMax, wire.ErrProtocol)
		}
		for g := id - 2; g > d.peerMax && g < id; g -= 2 {
			d.gaps[g] = struct{}{}
		}
		d.peerMax = id
		return idNew, nil
	}
	if _, ok := d.gaps[id]; ok {
		delete(d.gaps, id)
		return idNew, nil
	}
	return idGone, nil
}
