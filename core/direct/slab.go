package direct

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Slab is one memfd holding n areas of the same size (slots), mapped once
// in each process: the areas of successive connections between the same
// two processes, which then cost no memfd, mapping or unmapping each
// (shim/areapool.go). Sealed against shrinking and growing like an area's
// memfd. Its first page holds the slots' posts (post.go); slot i's area
// follows at a page plus i slots.
type Slab struct {
	mem   []byte
	fd    int   // the memfd: the creator's, kept; -1 for a peer's
	ident Ident // the memfd's
	slot  int   // bytes per area, a multiple of the page size
}

// SlotBytes returns the bytes a slab gives each area of size bytes: the
// size rounded up to whole pages, so that an area's pages are its own.
func SlotBytes(size int) int {
	page := unix.Getpagesize()
	return (size + page - 1) / page * page
}

// NewSlab creates a slab of n slots of slot bytes each (SlotBytes), after
// the page of their posts.
func NewSlab(n, slot int) (*Slab, error) {
	if n < 1 || slot < HeaderSize || slot%unix.Getpagesize() != 0 || int64(n)*int64(slot) > 1<<36 {
		return nil, fmt.Errorf("%w: slab of %d slots of %d bytes", ErrGeometry, n, slot)
	}
	fd, err := unix.MemfdCreate("sdpshim-slab", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("direct: memfd: %w", err)
	}
	s, err := mapSlab(fd, int64(unix.Getpagesize())+int64(n)*int64(slot), slot, Ident{})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// MapSlab maps a peer's slab from its memfd (which stays the caller's),
// whose slots are slot bytes. The memfd must be sealed against shrinking
// and hold the posts' page and whole slots.
func MapSlab(fd int, slot int) (*Slab, error) {
	size, id, err := sealedMemfd(fd, "slab")
	if err != nil {
		return nil, err
	}
	page := int64(unix.Getpagesize())
	if slot < HeaderSize || slot%unix.Getpagesize() != 0 || size < page+int64(slot) || size > 1<<36 || (size-page)%int64(slot) != 0 {
		return nil, fmt.Errorf("%w: slab of %d bytes, slots of %d", ErrGeometry, size, slot)
	}
	return mapSlab(fd, size, slot, id)
}

// mapSlab maps fd's size bytes, a memfd named id (sealed); own is the
// memfd this process made, which it keeps (a zero id: it is sized,
// sealed and named here).
func mapSlab(fd int, size int64, slot int, id Ident) (*Slab, error) {
	own := id == Ident{}
	if own {
		if err := unix.Ftruncate(fd, size); err != nil {
			return nil, fmt.Errorf("direct: size slab: %w", err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			return nil, fmt.Errorf("direct: seal slab: %w", err)
		}
		var err error
		if id, err = AreaIdent(fd); err != nil {
			return nil, err
		}
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("direct: map slab: %w", err)
	}
	s := &Slab{mem: mem, fd: -1, ident: id, slot: slot}
	if own {
		s.fd = fd
	}
	return s, nil
}

// Slots returns how many areas the slab holds.
func (s *Slab) Slots() int { return (len(s.mem) - unix.Getpagesize()) / s.slot }

// Slot returns the slab's bytes per area.
func (s *Slab) Slot() int { return s.slot }

// FD returns the creator's memfd (-1 for a peer's slab).
func (s *Slab) FD() int { return s.fd }

// Ident returns the memfd's Ident.
func (s *Slab) Ident() Ident { return s.ident }

// Area returns slot i as an area (its Unmap does nothing: the slab's
// mapping stays), or nil when i is out of range.
func (s *Slab) Area(i int) *Area {
	if i < 0 || i >= s.Slots() {
		return nil
	}
	o := unix.Getpagesize()
	return &Area{mem: s.mem[o+i*s.slot : o+(i+1)*s.slot : o+(i+1)*s.slot], fd: -1, slot: true}
}

// Discard gives the memory of slot i back (MADV_REMOVE: for every
// process that maps the slab), all but its first page, which holds the
// area's header: after both sides let the area go, for an area whose
// bytes made many pages resident.
func (s *Slab) Discard(i int) {
	page := unix.Getpagesize()
	if i < 0 || i >= s.Slots() || s.slot <= page {
		return
	}
	unix.Madvise(s.mem[page+i*s.slot+page:page+(i+1)*s.slot], unix.MADV_REMOVE)
}

// Unmap releases the mapping and the memfd. No area of it may be used
// after.
func (s *Slab) Unmap() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
}

// SetFD replaces the memfd's number (the caller moved it: the old one is
// closed).
func (s *Slab) SetFD(fd int) { s.fd = fd }
