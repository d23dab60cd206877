package wire

import (
	"encoding/binary"
	"fmt"
)

// Control record wire format (ControlRecordSize bytes, little-endian), a
// list of which is the payload of a FlagControl block:
//
//	0     kind (ControlKind)
//	1..3  zero
//	4..7  value
const ControlRecordSize = 8

// AppendControl appends the wire form of recs to dst and returns it.
func AppendControl(dst []byte, recs []ControlRecord) []byte {
	for _, r := range recs {
		var w [ControlRecordSize]byte
		w[0] = byte(r.Kind)
		binary.LittleEndian.PutUint32(w[4:], r.Value)
		dst = append(dst, w[:]...)
	}
	return dst
}

// DecodeControl parses a control payload, which may be memory the peer
// writes concurrently (each record is copied once, then checked). It
// appends the records to dst and returns it; a payload that is not whole
// records, a record of an unknown kind or with nonzero reserved bytes is
// an error wrapping ErrProtocol. A record's value is not judged here: the
// flow controller's OnControl does that.
func DecodeControl(dst []ControlRecord, p []byte) ([]ControlRecord, error) {
	if len(p)%ControlRecordSize != 0 {
		return dst, fmt.Errorf("control payload of %d bytes: %w", len(p), ErrProtocol)
	}
	for off := 0; off < len(p); off += ControlRecordSize {
		var w [ControlRecordSize]byte
		copy(w[:], p[off:])
		k := ControlKind(w[0])
		if k != ControlCredit && k != ControlWindow && k != ControlRcvBuf {
			return dst, fmt.Errorf("control record %d: kind %d: %w", off/ControlRecordSize, w[0], ErrProtocol)
		}
		if w[1]|w[2]|w[3] != 0 {
			return dst, fmt.Errorf("control record %d: reserved bytes set: %w", off/ControlRecordSize, ErrProtocol)
		}
		dst = append(dst, ControlRecord{Kind: k, Value: binary.LittleEndian.Uint32(w[4:])})
	}
	return dst, nil
}
