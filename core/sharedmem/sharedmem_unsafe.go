package sharedmem

import (
	"sync/atomic"
	"unsafe"
)

// Shared memory is written by another process (or a NIC) that the Go
// memory model knows nothing about. Every word that orders other data (a
// status byte, a producer index) is read and written with these atomic
// helpers; payload bytes are plain copies ordered by them. sync/atomic has
// no 8-bit operations, so a byte is stored with a compare-and-swap of its
// aligned 32-bit word, which leaves the three neighbouring bytes intact even
// when the peer writes them at the same time.

// LoadByte atomically loads b[i] (acquire).
func LoadByte(b []byte, i int) byte {
	_ = b[i]
	base, shift := wordOf(b, i)
	return byte(atomic.LoadUint32(base) >> shift)
}

// StoreByte atomically stores v into b[i] (release).
func StoreByte(b []byte, i int, v byte) {
	_ = b[i]
	base, shift := wordOf(b, i)
	for {
		old := atomic.LoadUint32(base)
		nw := old&^(0xff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(base, old, nw) {
			return
		}
	}
}

// CompareAndSwapByte atomically replaces b[i] with nw if it holds old.
func CompareAndSwapByte(b []byte, i int, old, nw byte) bool {
	_ = b[i]
	base, shift := wordOf(b, i)
	for {
		w := atomic.LoadUint32(base)
		if byte(w>>shift) != old {
			return false
		}
		if atomic.CompareAndSwapUint32(base, w, w&^(0xff<<shift)|uint32(nw)<<shift) {
			return true
		}
	}
}

// wordOf returns the aligned 32-bit word holding b[i] and the bit shift of
// the byte inside it (little-endian). The word may start before b or end
// after it; callers only use it on mappings whose length is a multiple of
// 4 and whose start is aligned, as every region is.
func wordOf(b []byte, i int) (*uint32, uint) {
	p := unsafe.Pointer(&b[i])
	mis := uintptr(p) & 3
	return (*uint32)(unsafe.Add(p, -int(mis))), uint(mis) * 8
}

// Uint32At returns an atomic view of the 4-byte aligned word at b[off:].
// It panics if off is out of range or not aligned.
func Uint32At(b []byte, off int) *atomic.Uint32 {
	_ = b[off+3]
	p := unsafe.Pointer(&b[off])
	if uintptr(p)&3 != 0 {
		panic("core: unaligned 32-bit shared word")
	}
	return (*atomic.Uint32)(p)
}

// Uint64At returns an atomic view of the 8-byte aligned word at b[off:].
// It panics if off is out of range or not aligned.
func Uint64At(b []byte, off int) *atomic.Uint64 {
	_ = b[off+7]
	p := unsafe.Pointer(&b[off])
	if uintptr(p)&7 != 0 {
		panic("core: unaligned 64-bit shared word")
	}
	return (*atomic.Uint64)(p)
}

// Fence orders every memory access before it against every access after it
// (a full barrier), for ordering plain payload copies against later
// shared-memory writes on weakly ordered CPUs.
func Fence() {
	fenceWord.Add(1) // a sequentially consistent read-modify-write
}

var fenceWord atomic.Uint32
