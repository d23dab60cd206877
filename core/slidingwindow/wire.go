package slidingwindow

import (
	"encoding/binary"
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Immediate of a data WRITE_WITH_IMM (see the package documentation).
const (
	immLenBits = 20
	immLenMask = 1<<immLenBits - 1
	immSeqBits = 11
	immSeqMask = 1<<immSeqBits - 1
	immFull    = 1 << 31
)

// encodeImm returns the immediate announcing block k with n payload bytes.
func encodeImm(k uint64, n int, full bool) uint32 {
	v := uint32(n)&immLenMask | (uint32(k)&immSeqMask)<<immLenBits
	if full {
		v |= immFull
	}
	return v
}

// decodeImm splits an immediate; the caller validates the fields.
func decodeImm(v uint32) (seq uint32, n int, full bool) {
	return v >> immLenBits & immSeqMask, int(v & immLenMask), v&immFull != 0
}

// Message wire format (msgSize bytes, a SEND into one of the receives):
//
//	0     kind (msgAck, msgClose)
//	1..3  zero
//	4..7  value: msgAck the receiver's tail mod 2^32; msgClose zero
const (
	msgSize  = 8
	msgAck   = 1
	msgClose = 2
)

func encodeMsg(b []byte, kind byte, value uint32) {
	_ = b[msgSize-1]
	b[0], b[1], b[2], b[3] = kind, 0, 0, 0
	binary.LittleEndian.PutUint32(b[4:], value)
}

// decodeMsg reads a message from memory the peer wrote, once, and checks
// its form (not its value). Errors wrap wire.ErrProtocol.
func decodeMsg(p []byte) (kind byte, value uint32, err error) {
	var w [msgSize]byte
	if copy(w[:], p) != msgSize {
		return 0, 0, fmt.Errorf("slidingwindow: message of %d bytes: %w", len(p), wire.ErrProtocol)
	}
	kind, value = w[0], binary.LittleEndian.Uint32(w[4:])
	switch {
	case w[1]|w[2]|w[3] != 0:
		return 0, 0, fmt.Errorf("slidingwindow: message with reserved bytes set: %w", wire.ErrProtocol)
	case kind == msgClose && value != 0:
		return 0, 0, fmt.Errorf("slidingwindow: farewell with value %d: %w", value, wire.ErrProtocol)
	case kind != msgAck && kind != msgClose:
		return 0, 0, fmt.Errorf("slidingwindow: message kind %d: %w", kind, wire.ErrProtocol)
	}
	return kind, value, nil
}

// advance returns the new tail an acknowledgement of value carries for a
// sender whose tail is tail and head head: the tail must move forward and
// not past the head. Errors wrap wire.ErrProtocol.
func advance(tail, head uint64, value uint32) (uint64, error) {
	d := uint64(value - uint32(tail))
	if d == 0 || d > head-tail {
		return tail, fmt.Errorf("slidingwindow: acknowledgement of tail %d (mod 2^32) with tail %d, head %d: %w",
			value, tail, head, wire.ErrProtocol)
	}
	return tail + d, nil
}

// blob is what a side tells its peer about its ring:
//
//	0..3   magic "SWn1"
//	4..7   remote key
//	8..15  address of byte 0
//	16..23 length
//	24..27 blocks
//	28..31 block size
const (
	blobMagic = "SWn1"
	blobSize  = 32
)

func encodeBlob(r verbs.RemoteRegion, blocks, size int) []byte {
	b := make([]byte, blobSize)
	copy(b, blobMagic)
	binary.LittleEndian.PutUint32(b[4:], r.Key)
	binary.LittleEndian.PutUint64(b[8:], r.Addr)
	binary.LittleEndian.PutUint64(b[16:], r.Len)
	binary.LittleEndian.PutUint32(b[24:], uint32(blocks))
	binary.LittleEndian.PutUint32(b[28:], uint32(size))
	return b
}

// decodeBlob checks the peer's blob against the agreed ring.
func decodeBlob(b []byte, blocks, size int) (verbs.RemoteRegion, error) {
	if len(b) != blobSize || string(b[:4]) != blobMagic {
		return verbs.RemoteRegion{}, fmt.Errorf("slidingwindow: peer's ring description malformed: %w", wire.ErrProtocol)
	}
	r := verbs.RemoteRegion{
		Key:  binary.LittleEndian.Uint32(b[4:]),
		Addr: binary.LittleEndian.Uint64(b[8:]),
		Len:  binary.LittleEndian.Uint64(b[16:]),
	}
	n, s := binary.LittleEndian.Uint32(b[24:]), binary.LittleEndian.Uint32(b[28:])
	if int(n) != blocks || int(s) != size || r.Len < uint64(blocks)*uint64(size) {
		return verbs.RemoteRegion{}, fmt.Errorf("slidingwindow: peer's ring (%d blocks of %d, %d bytes) does not fit the agreed one: %w",
			n, s, r.Len, wire.ErrProtocol)
	}
	return r, nil
}
