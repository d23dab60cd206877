package statusbyte

import (
	"encoding/binary"
	"fmt"

	"github.com/sdpshim/sdpshim/core/doorbell"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Bells of a status-byte link: a side sleeps on bellData for blocks to
// arrive and on bellSpace for its peer to release blocks.
const (
	bellData = iota
	bellSpace
	numBells
)

// layout places the regions' parts. Receive region (the peer writes and
// reads it): the doorbell board, the status array, the blocks. Local
// region: bell scratch, the constant status byte 1, the READ landing area
// for the peer's status array, and one staging block: every block is
// staged there, since a block's WRITE is posted visible (it completed when
// PostData returns) before the next is staged. One block instead of N
// keeps the copy into it in cache.
type layout struct {
	blocks, size int // N, S

	boardOff, statusOff, blocksOff, recvLen int
	scratchOff, oneOff, readOff, stageOff   int
	localLen                                int
}

const align = 64

func roundUp(n, a int) int { return (n + a - 1) / a * a }

func newLayout(blocks, size int) layout {
	l := layout{blocks: blocks, size: size}
	statusLen := roundUp(blocks, align)
	l.statusOff = roundUp(doorbell.BellBoardSize(numBells), align)
	l.blocksOff = l.statusOff + statusLen
	l.recvLen = l.blocksOff + blocks*size
	l.scratchOff = 0
	l.oneOff = doorbell.BellScratchSize
	l.readOff = align
	l.stageOff = l.readOff + statusLen
	l.localLen = l.stageOff + size
	return l
}

// blob is what a side tells its peer about its receive region:
//
//	0..3   magic "SBy1"
//	4..7   remote key
//	8..15  address of byte 0
//	16..23 length
//	24..27 blocks
//	28..31 block size
const blobMagic = "SBy1"

func encodeBlob(r verbs.RemoteRegion, l layout) []byte {
	b := make([]byte, 32)
	copy(b, blobMagic)
	binary.LittleEndian.PutUint32(b[4:], r.Key)
	binary.LittleEndian.PutUint64(b[8:], r.Addr)
	binary.LittleEndian.PutUint64(b[16:], r.Len)
	binary.LittleEndian.PutUint32(b[24:], uint32(l.blocks))
	binary.LittleEndian.PutUint32(b[28:], uint32(l.size))
	return b
}

// decodeBlob checks the peer's blob against the agreed layout.
func decodeBlob(b []byte, l layout) (verbs.RemoteRegion, error) {
	if len(b) != 32 || string(b[:4]) != blobMagic {
		return verbs.RemoteRegion{}, fmt.Errorf("statusbyte: peer's region description malformed: %w", wire.ErrProtocol)
	}
	r := verbs.RemoteRegion{
		Key:  binary.LittleEndian.Uint32(b[4:]),
		Addr: binary.LittleEndian.Uint64(b[8:]),
		Len:  binary.LittleEndian.Uint64(b[16:]),
	}
	n, s := binary.LittleEndian.Uint32(b[24:]), binary.LittleEndian.Uint32(b[28:])
	if int(n) != l.blocks || int(s) != l.size || r.Len < uint64(l.recvLen) {
		return verbs.RemoteRegion{}, fmt.Errorf("statusbyte: peer's region (%d blocks of %d, %d bytes) does not fit the agreed layout: %w",
			n, s, r.Len, wire.ErrProtocol)
	}
	return r, nil
}
