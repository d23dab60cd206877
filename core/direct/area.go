package direct

/*
#cgo CFLAGS: -D_GNU_SOURCE -O2
#include "../../preload/c/direct.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Geometry limits (direct.h).
const (
	MaxBlocks    = 65536
	MaxBlockSize = 1 << 20
	HeaderSize   = 16 // bytes of each block taken by its header
	// areaVersion is the layout's version in the area header: an area of
	// another version is refused (direct.h).
	areaVersion = C.SDP_DAREA_VERSION
)

// ErrGeometry is returned for an area whose header does not describe a
// valid area of its size.
var ErrGeometry = errors.New("direct: bad area geometry")

// Area is a mapped direct area: a memfd shared with the peer.
type Area struct {
	mem  []byte
	fd   int  // the memfd, -1 once handed off or closed
	slot bool // one of a Slab's areas: the mapping is the slab's
}

// Ident names an area's memfd: two descriptors with the same Ident are
// the same area.
type Ident struct{ Dev, Ino uint64 }

// AreaIdent returns the Ident of the memfd fd.
func AreaIdent(fd int) (Ident, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Ident{}, fmt.Errorf("direct: stat area: %w", err)
	}
	return Ident{Dev: st.Dev, Ino: st.Ino}, nil
}

// Size returns the bytes an area of blocks blocks of blockSize bytes needs.
func Size(blocks, blockSize int) int {
	return int(C.sdp_darea_size(C.uint32_t(blocks), C.uint32_t(blockSize)))
}

// NewArea creates an area: blocks (a power of two up to MaxBlocks) of
// blockSize bytes (a multiple of 64 above HeaderSize, up to MaxBlockSize)
// each way, for the stream id stream. Its memfd is sealed against
// shrinking, so a peer cannot truncate pages under this process.
func NewArea(blocks, blockSize int, stream uint32) (*Area, error) {
	if blocks < 1 || blocks > MaxBlocks || blocks&(blocks-1) != 0 || blockSize <= HeaderSize ||
		blockSize%64 != 0 || blockSize > MaxBlockSize {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes", ErrGeometry, blocks, blockSize)
	}
	size := Size(blocks, blockSize)
	fd, err := unix.MemfdCreate("sdpshim-direct", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("direct: memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("direct: size area: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("direct: seal area: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("direct: map area: %w", err)
	}
	if r := C.sdp_darea_init(unsafe.Pointer(&mem[0]), C.size_t(size), C.uint32_t(blocks), C.uint32_t(blockSize), C.uint32_t(stream)); r != 0 {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, fmt.Errorf("%w: init: %d", ErrGeometry, int(r))
	}
	return &Area{mem: mem, fd: fd}, nil
}

// MapArea maps the area a peer created, from its memfd (which stays the
// caller's). The memfd must be sealed against shrinking and hold a valid
// area header; the mapping never extends past what the seal guarantees.
func MapArea(fd int) (*Area, error) {
	size, _, err := sealedMemfd(fd, "area")
	if err != nil {
		return nil, err
	}
	if size < int64(unsafe.Sizeof(C.struct_sdp_darea{})) || size > 1<<36 {
		return nil, fmt.Errorf("%w: %d bytes", ErrGeometry, size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("direct: map area: %w", err)
	}
	return &Area{mem: mem, fd: -1}, nil
}

// sealedMemfd returns the size and Ident of a peer's memfd fd (what: an
// area or a slab), which must be sealed against shrinking: its pages
// cannot go from under a mapping of that size.
func sealedMemfd(fd int, what string) (int64, Ident, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return 0, Ident{}, fmt.Errorf("direct: %s memfd not sealed against shrinking (seals %#x, %v)", what, seals, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, Ident{}, fmt.Errorf("direct: stat %s: %w", what, err)
	}
	return st.Size, Ident{Dev: st.Dev, Ino: st.Ino}, nil
}

// Reset makes a used area fresh again, as NewArea would have made it (its
// header and both directions' status bytes cleared): for a later
// connection between the same two processes, once both have let the
// earlier one's handles go (Released). The memfd and the mapping stay.
func (a *Area) Reset(blocks, blockSize int, stream uint32) error {
	if a.mem == nil {
		return ErrGeometry
	}
	if r := C.sdp_darea_init(unsafe.Pointer(&a.mem[0]), C.size_t(len(a.mem)), C.uint32_t(blocks), C.uint32_t(blockSize), C.uint32_t(stream)); r != 0 {
		return fmt.Errorf("%w: reset: %d", ErrGeometry, int(r))
	}
	return nil
}

// Release marks, in the area, that side's process holds no handle on it
// any more (Conn.Release has returned on every one), and reports whether
// the other side had marked it before (this side let go last).
func (a *Area) Release(side int) (last bool) {
	old := C.sdp_darea_release(unsafe.Pointer(&a.mem[0]), C.int(side))
	return old&(1<<(1-side&1)) != 0
}

// Released reports whether side's process marked the area released.
func (a *Area) Released(side int) bool {
	return C.sdp_darea_released(unsafe.Pointer(&a.mem[0]), C.int(side)) != 0
}

// Moved returns the bytes both directions published, as the area says (a
// peer writes half of it: a hint).
func (a *Area) Moved() uint64 { return uint64(C.sdp_darea_moved(unsafe.Pointer(&a.mem[0]))) }

// FD returns the area's memfd (the creator's, to pass to the peer), or -1.
func (a *Area) FD() int { return a.fd }

// CloseFD closes the memfd once the peer has it (the mapping stays).
func (a *Area) CloseFD() {
	if a.fd >= 0 {
		unix.Close(a.fd)
		a.fd = -1
	}
}

// Unmap releases the mapping and the memfd (a slab's area: nothing, the
// slab holds both). No handle on it may be used after.
func (a *Area) Unmap() {
	if a.slot {
		return
	}
	a.CloseFD()
	if a.mem != nil {
		unix.Munmap(a.mem)
		a.mem = nil
	}
}
