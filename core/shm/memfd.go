package shm

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// pageRound rounds n up to a multiple of the page size.
func pageRound(n int) int {
	ps := unix.Getpagesize()
	return (n + ps - 1) &^ (ps - 1)
}

// createSealedMemfd creates a memfd of size bytes (a multiple of the page
// size), seals its size so no holder of the fd can shrink it under a
// mapping, and maps it read-write. The caller owns fd and mem.
func createSealedMemfd(name string, size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	noteFDs(fd)
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		closeRaw(fd)
		return -1, nil, fmt.Errorf("ftruncate memfd to %d: %w", size, err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		closeRaw(fd)
		return -1, nil, fmt.Errorf("seal memfd: %w", err)
	}
	mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		closeRaw(fd)
		return -1, nil, fmt.Errorf("mmap memfd (%d bytes): %w", size, err)
	}
	return fd, mem, nil
}

// mapPeerMemfd maps size bytes of a memfd received from a peer after
// checking that it is a regular shmem file at least size bytes long whose
// size is sealed against shrinking (so the mapping can never fault). It
// does not close fd.
func mapPeerMemfd(fd int, size uint64, writable bool) ([]byte, error) {
	if size == 0 || size > verbs.MaxRegionSize {
		return nil, fmt.Errorf("peer memfd of %d bytes: %w", size, verbs.ErrInvalid)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat peer memfd: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < 0 || uint64(st.Size) < size {
		return nil, fmt.Errorf("peer memfd: mode %o size %d, want regular file of %d bytes: %w",
			st.Mode, st.Size, size, verbs.ErrInvalid)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("peer memfd not sealed against shrinking (seals %#x, %v): %w", seals, err, verbs.ErrInvalid)
	}
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(fd, 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap peer memfd (%d bytes): %w", size, err)
	}
	return mem, nil
}

// checkEventfd verifies that fd is an eventfd (where /proc is mounted)
// and makes it non-blocking, so that ringing it never blocks.
func checkEventfd(fd int) error {
	var buf [64]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	if err == unix.ENOENT {
		n, err = copy(buf[:], "anon_inode:[eventfd]"), nil // no /proc: trust it
	}
	if err != nil {
		return fmt.Errorf("inspect peer eventfd: %w", err)
	}
	if string(buf[:n]) != "anon_inode:[eventfd]" {
		return fmt.Errorf("peer doorbell is %q, not an eventfd: %w", buf[:n], verbs.ErrInvalid)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return fmt.Errorf("peer eventfd non-blocking: %w", err)
	}
	return nil
}

// checkSeqpacket verifies that fd is a unix SOCK_SEQPACKET socket.
func checkSeqpacket(fd int) error {
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("inspect peer socket: %w", err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("inspect peer socket: %w", err)
	}
	if dom != unix.AF_UNIX || typ != unix.SOCK_SEQPACKET {
		return fmt.Errorf("peer side channel is domain %d type %d: %w", dom, typ, verbs.ErrInvalid)
	}
	return nil
}

// one is the value written to an eventfd to ring it.
var one = [8]byte{1}

// ringEventfd adds one to an eventfd. A full counter (EAGAIN) is already
// readable, so the error is ignored.
func ringEventfd(fd int) {
	for {
		if _, err := unix.Write(fd, one[:]); err != unix.EINTR {
			return
		}
	}
}

// drainEventfd resets a non-blocking eventfd's counter.
func drainEventfd(fd int) {
	var buf [8]byte
	for {
		if _, err := unix.Read(fd, buf[:]); err != unix.EINTR {
			return
		}
	}
}
