package direct

/*
#include "../../preload/c/direct.h"
#include "../../preload/c/tenant.h"
#include <stddef.h>

static size_t board_entry_at(void) { return offsetof(struct sdp_board, entry); }

static void set_board(struct sdp_dconn *c, int fd, uint32_t pid)
{
	__atomic_store_n(&c->board_pid, pid, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->board_fd, fd, __ATOMIC_SEQ_CST);
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tenant board's layout (preload/c/tenant.h).
const (
	boardMagic   = C.SDP_BOARD_MAGIC
	boardVersion = C.SDP_BOARD_VERSION
)

var (
	boardSize    = int(unsafe.Sizeof(C.struct_sdp_board{}))
	boardEntries = int(C.SDP_BOARD_ENTRIES)
	entryAt      = int(C.board_entry_at())
	entrySize    = int(unsafe.Sizeof(C.struct_sdp_board_entry{}))
)

// ErrNoBoard: the file does not hold a tenant board of this build's
// layout.
var ErrNoBoard = errors.New("not a tenant board of this layout")

// BoardEntry is one process's entry on a tenant board.
type BoardEntry struct {
	PID    int
	Demand int           // its streams that want to send bulk data
	Beat   time.Duration // when it last wrote the entry (CLOCK_MONOTONIC)
}

// ReadBoard returns the entries in use (a pid set) of the tenant board
// at fd, in board order. Another process may write anything there: the
// values are as read.
func ReadBoard(fd int) ([]BoardEntry, error) {
	b := make([]byte, boardSize)
	if n, err := unix.Pread(fd, b, 0); err != nil || n != len(b) {
		return nil, fmt.Errorf("tenant board: read %d of %d bytes: %v", n, len(b), err)
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boardMagic || le.Uint32(b[4:]) != boardVersion || le.Uint32(b[8:]) != uint32(boardEntries) {
		return nil, ErrNoBoard
	}
	var out []BoardEntry
	for i := range boardEntries {
		e := b[entryAt+i*entrySize:]
		if pid := le.Uint32(e); pid != 0 {
			out = append(out, BoardEntry{PID: int(pid), Demand: int(le.Uint32(e[4:])), Beat: time.Duration(int64(le.Uint64(e[8:])))})
		}
	}
	return out, nil
}

// turns is what the gate of this package's copy of preload/c/tenant.c
// holds now: the cap, the turns held and the threads waiting for one.
func turns() (cap, held, waiting int) {
	var c, h, w C.uint32_t
	C.sdp_tenant_state(&c, &h, &w)
	return int(c), int(h), int(w)
}

// PrepareBoard lays out the tenant board open at fd
// (rendezvous.Node.OpenBoard) when it is not laid out yet: it grows the
// file to the board's size and writes the header. Entries already there
// are kept (other processes of the user write theirs at any time); a
// header of another layout (another build) is overwritten, and the
// processes of that build read no board until they write theirs again.
func PrepareBoard(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < int64(boardSize) {
		if err := unix.Ftruncate(fd, int64(boardSize)); err != nil {
			return fmt.Errorf("tenant board: grow to %d bytes: %w", boardSize, err)
		}
	}
	want := make([]byte, 12)
	binary.LittleEndian.PutUint32(want[0:], boardMagic)
	binary.LittleEndian.PutUint32(want[4:], boardVersion)
	binary.LittleEndian.PutUint32(want[8:], C.SDP_BOARD_ENTRIES)
	have := make([]byte, len(want))
	if n, err := unix.Pread(fd, have, 0); err == nil && n == len(have) && string(have) == string(want) {
		return nil
	}
	if n, err := unix.Pwrite(fd, want, 0); err != nil || n != len(want) {
		return fmt.Errorf("tenant board: write the header: %d bytes, %v", n, err)
	}
	return nil
}

// SetBoard gives the handle this process's tenant board (fd, opened and
// prepared by this process, which keeps it open for as long as any
// handle has it; -1: none): its blocking bulk sends then take turns with
// the bulk sends of the user's other processes (preload/c/tenant.c).
// Without a board they take turns among this process's streams only.
func (c *Conn) SetBoard(fd int) {
	if h := c.hold(); h != nil {
		C.set_board(h, C.int(fd), C.uint32_t(unix.Getpid()))
		c.done()
	}
}
