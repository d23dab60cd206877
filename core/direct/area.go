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
)

// ErrGeometry is returned for an area whose header does not describe a
// valid area of its size.
var ErrGeometry = errors.New("direct: bad area geometry")

// Area is a mapped direct area: a memfd shared with the peer.
type Area struct {
	mem []byte
	fd  int // the memfd, -1 once handed off or closed
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
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("direct: area memfd not sealed against shrinking (seals %#x, %v)", seals, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("direct: stat area: %w", err)
	}
	if st.Size < int64(unsafe.Sizeof(C.struct_sdp_darea{})) || st.Size > 1<<36 {
		return nil, fmt.Errorf("%w: %d bytes", ErrGeometry, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("direct: map area: %w", err)
	}
	return &Area{mem: mem, fd: -1}, nil
}

// FD returns the area's memfd (the creator's, to pass to the peer), or -1.
func (a *Area) FD() int { return a.fd }

// CloseFD closes the memfd once the peer has it (the mapping stays).
func (a *Area) CloseFD() {
	if a.fd >= 0 {
		unix.Close(a.fd)
		a.fd = -1
	}
}

// Unmap releases the mapping and the memfd. No handle on it may be used
// after.
func (a *Area) Unmap() {
	a.CloseFD()
	if a.mem != nil {
		unix.Munmap(a.mem)
		a.mem = nil
	}
}
