package coretest

import (
	"encoding/binary"
	"math/rand/v2"
)

// fill writes the pseudo-random pattern of seed into p. Both sides derive
// the same bytes from the same seed, so payloads are checked without
// sending them over the link.
func fill(p []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x636f726574657374))
	var w [8]byte
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(p[i:], w[:])
	}
}

// mismatch returns the index of the first byte of p that differs from the
// pattern of seed, or -1.
func mismatch(p []byte, seed uint64) int {
	want := make([]byte, len(p))
	fill(want, seed)
	for i := range p {
		if p[i] != want[i] {
			return i
		}
	}
	return -1
}

// nonzeroAt returns the index of the first nonzero byte of p, or -1.
func nonzeroAt(p []byte) int {
	for i, b := range p {
		if b != 0 {
			return i
		}
	}
	return -1
}
