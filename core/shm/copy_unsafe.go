package shm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/sdpshim/sdpshim/core/sharedmem"
)

// storeSmall stores src (1, 2, 4 or 8 bytes) into dst, which has the same
// length and is aligned to it inside a page-aligned mapping, as a single
// atomic store (release). Bytes and half-words are compare-and-swapped into
// their aligned 32-bit word, leaving the neighbouring bytes intact.
func storeSmall(dst, src []byte) {
	switch len(src) {
	case 1:
		sharedmem.StoreByte(dst, 0, src[0])
	case 2:
		w, shift := halfWordOf(dst)
		v := uint32(binary.LittleEndian.Uint16(src)) << shift
		for {
			old := w.Load()
			if w.CompareAndSwap(old, old&^(0xffff<<shift)|v) {
				return
			}
		}
	case 4:
		sharedmem.Uint32At(dst, 0).Store(binary.LittleEndian.Uint32(src))
	case 8:
		sharedmem.Uint64At(dst, 0).Store(binary.LittleEndian.Uint64(src))
	}
}

// loadSmall fills dst (1, 2, 4 or 8 bytes) from src, aligned as for
// storeSmall, with a single atomic load (acquire).
func loadSmall(dst, src []byte) {
	switch len(dst) {
	case 1:
		dst[0] = sharedmem.LoadByte(src, 0)
	case 2:
		w, shift := halfWordOf(src)
		binary.LittleEndian.PutUint16(dst, uint16(w.Load()>>shift))
	case 4:
		binary.LittleEndian.PutUint32(dst, sharedmem.Uint32At(src, 0).Load())
	case 8:
		binary.LittleEndian.PutUint64(dst, sharedmem.Uint64At(src, 0).Load())
	}
}

// halfWordOf returns the aligned 32-bit word holding the 2-byte aligned
// b[0:2] and the half-word's bit shift inside it (little-endian). The word
// may extend before b; mappings are page-aligned, so it stays inside the
// mapping.
func halfWordOf(b []byte) (*atomic.Uint32, uint) {
	_ = b[1]
	p := unsafe.Pointer(&b[0])
	mis := uintptr(p) & 3
	if mis&1 != 0 {
		panic("shm: unaligned 16-bit shared word")
	}
	return (*atomic.Uint32)(unsafe.Add(p, -int(mis))), uint(mis) * 8
}
