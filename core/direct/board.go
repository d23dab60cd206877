package direct

/*
#include "../../preload/c/direct.h"
#include "../../preload/c/tenant.h"
#include <stddef.h>

static size_t board_entry_at(void) { return offsetof(struct sdp_board, entry); }
static size_t board_starved_at(void) { return offsetof(struct sdp_board, starved_pid); }

static void set_board(struct sdp_dconn *c, int fd, uint32_t pid)
{
	__atomic_store_n(&c->board_pid, pid, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->board_fd, fd, __ATOMIC_SEQ_CST);
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The tenant board's layout as preload/c/tenant.h has it (the Go core
// makes and reads the file in core/rendezvous, whose constants
// TestBoardLayout compares with these).
const (
	boardMagic   = C.SDP_BOARD_MAGIC
	boardVersion = C.SDP_BOARD_VERSION
)

var (
	boardSize    = int(unsafe.Sizeof(C.struct_sdp_board{}))
	boardEntries = int(C.SDP_BOARD_ENTRIES)
	entryAt      = int(C.board_entry_at())
	starvedAt    = int(C.board_starved_at())
	entrySize    = int(unsafe.Sizeof(C.struct_sdp_board_entry{}))
)

// ownPID is this process's pid, read once (a fork child never runs this
// copy of the core: it loads one of its own).
var ownPID = unix.Getpid()

// SetBoard gives the handle this process's tenant board (fd, opened and
// prepared by this process, which keeps it open for as long as any
// handle has it; -1: none): its blocking bulk sends then take turns with
// the bulk sends of the user's other processes (preload/c/tenant.c).
// Without one they take turns only past every turn (256 at once).
func (c *Conn) SetBoard(fd int) {
	if h := c.hold(); h != nil {
		C.set_board(h, C.int(fd), C.uint32_t(ownPID))
		c.done()
	}
}

// turns is what the gate of this package's copy of preload/c/tenant.c
// holds now: the cap, the turns held and the threads waiting for one.
func turns() (cap, held, waiting int) {
	var c, h, w C.uint32_t
	C.sdp_tenant_state(&c, &h, &w)
	return int(c), int(h), int(w)
}
