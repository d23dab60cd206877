package wire

import (
	"encoding/binary"
	"fmt"
)

// Block header wire format (HeaderSize bytes, little-endian), at the start
// of every block a transport carries:
//
//	0      magic/version byte (HeaderMagic)
//	1      flags (BlockFlags)
//	2..3   check: a 16-bit hash of bytes 0..1 and 4..15
//	4..7   stream id
//	8..11  sequence number
//	12..15 payload length
//
// The check catches a peer (or a bug) that writes a header torn or at the
// wrong place; it is no defence against a peer that means harm, which the
// field validation covers: a header that decodes is safe to act on.
const (
	HeaderSize  = 16
	HeaderMagic = 0xB1 // version 1 of the block header
)

// knownFlags is every flag a header may carry.
const knownFlags = FlagData | FlagFIN | FlagControl | FlagReset

// Validate checks h against the rules every block obeys, for a transport
// whose blocks carry at most maxPayload bytes:
//   - the stream id is not 0;
//   - only known flags, and at least one;
//   - FlagControl stands alone, and its payload is a whole number of
//     control records (possibly none: a stream's opening block);
//   - FlagReset stands alone (FlagFIN too unless with FlagData) and
//     carries no payload;
//   - FlagData carries at least one byte;
//   - Len <= maxPayload.
//
// Errors wrap ErrProtocol.
func (h BlockHeader) Validate(maxPayload int) error {
	bad := func(why string) error {
		return fmt.Errorf("block header %+v: %s: %w", h, why, ErrProtocol)
	}
	switch {
	case h.Stream == 0:
		return bad("stream id 0")
	case h.Flags == 0 || h.Flags&^knownFlags != 0:
		return bad("unknown flags")
	case maxPayload < 0 || uint64(h.Len) > uint64(maxPayload):
		return bad(fmt.Sprintf("length over %d", maxPayload))
	}
	switch h.Flags {
	case FlagControl:
		if h.Len%ControlRecordSize != 0 {
			return bad("control payload is not whole records")
		}
	case FlagReset, FlagFIN:
		if h.Len != 0 {
			return bad("payload on a reset or bare FIN")
		}
	case FlagData, FlagData | FlagFIN:
		if h.Len == 0 {
			return bad("empty data block")
		}
	default:
		return bad("flag combination")
	}
	return nil
}

// Encode writes h into b[:HeaderSize]. It panics if b is shorter.
func (h BlockHeader) Encode(b []byte) {
	_ = b[HeaderSize-1]
	b[0] = HeaderMagic
	b[1] = byte(h.Flags)
	binary.LittleEndian.PutUint32(b[4:], h.Stream)
	binary.LittleEndian.PutUint32(b[8:], h.Seq)
	binary.LittleEndian.PutUint32(b[12:], h.Len)
	binary.LittleEndian.PutUint16(b[2:], headerCheck(b))
}

// DecodeHeader reads and validates a header from b, which may be memory
// the peer writes concurrently: b is read once into a local copy and only
// the copy is checked and returned. Errors wrap ErrProtocol.
func DecodeHeader(b []byte, maxPayload int) (BlockHeader, error) {
	if len(b) < HeaderSize {
		return BlockHeader{}, fmt.Errorf("block header: %d bytes: %w", len(b), ErrProtocol)
	}
	var c [HeaderSize]byte
	copy(c[:], b)
	if c[0] != HeaderMagic {
		return BlockHeader{}, fmt.Errorf("block header: magic %#x, want %#x: %w", c[0], HeaderMagic, ErrProtocol)
	}
	if got, want := binary.LittleEndian.Uint16(c[2:]), headerCheck(c[:]); got != want {
		return BlockHeader{}, fmt.Errorf("block header: check %#04x, want %#04x: %w", got, want, ErrProtocol)
	}
	h := BlockHeader{
		Flags:  BlockFlags(c[1]),
		Stream: binary.LittleEndian.Uint32(c[4:]),
		Seq:    binary.LittleEndian.Uint32(c[8:]),
		Len:    binary.LittleEndian.Uint32(c[12:]),
	}
	if err := h.Validate(maxPayload); err != nil {
		return BlockHeader{}, err
	}
	return h, nil
}

// headerCheck hashes every header byte but the check itself (FNV-1a,
// folded to 16 bits).
func headerCheck(b []byte) uint16 {
	h := uint32(2166136261)
	for i, x := range b[:HeaderSize] {
		if i == 2 || i == 3 {
			continue
		}
		h = (h ^ uint32(x)) * 16777619
	}
	return uint16(h ^ h>>16)
}
