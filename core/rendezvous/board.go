package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// The tenant board: one file per user in the run directory, tenants.EUID,
// through which the direct path's bulk sends take turns between the
// user's processes (preload/c/tenant.h has the layout and the rule, and
// reads and writes it; core/direct's TestBoardLayout checks that the two
// agree). A header of magic, version, entry count and the starved mark
// (the pid and time of the last late small message, at BoardStarved) in
// 64 bytes, then BoardEntries entries of pid, demand and time, 16 bytes
// each, little endian.
const (
	BoardMagic       = 0x42544453 // "SDTB"
	BoardVersion     = 1
	BoardEntries     = 128
	BoardHeader      = 64
	BoardStarved     = 12 // the starved mark: pid (4 bytes), then time (8)
	BoardStarvedSize = 12
	BoardEntry       = 16
	BoardSize        = BoardHeader + BoardEntries*BoardEntry
)

// ErrNoBoard: the file does not hold a tenant board of this layout.
var ErrNoBoard = errors.New("not a tenant board of this layout")

// Board is what a tenant board holds.
type Board struct {
	// Entries are the entries in use (a pid set), in board order.
	Entries []TenantEntry
	// StarvedPID is the process whose small message was last late
	// (preemption, preload/c/direct.c), and StarvedAt when it said so
	// (CLOCK_MONOTONIC); 0 when none has.
	StarvedPID int
	StarvedAt  time.Duration
}

// TenantEntry is one process's entry on a tenant board.
type TenantEntry struct {
	PID    int
	Demand int           // its streams that want to send bulk data
	Beat   time.Duration // when it last wrote the entry (CLOCK_MONOTONIC)
}

// BoardNow is the time on the board's clock (CLOCK_MONOTONIC, the C
// side's sdp_now_ns): an entry's age is BoardNow() - Beat.
func BoardNow() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// boardName is the board of effective uid euid.
func boardName(euid uint32) string { return fmt.Sprintf("tenants.%d", euid) }

// OpenBoard opens this user's tenant board in the run directory, creating
// it (mode 0600) and laying it out when needed: the file tenants.EUID (of
// the effective uid now), which must be a regular file of that uid with
// no access for others and one link (a symlink, a file of another uid or
// a hard link to somewhere else is refused). The descriptor is at one of
// the core's high numbers (fdhook.HighBase) and reported as the core's
// (fdhook.NoteFDs) before anything is written through it; the caller owns
// it (close-on-exec; fdhook.CloseFD). Another process of the user may
// write anything into the file; the C side only reads it with pread.
func (n *Node) OpenBoard() (int, error) {
	euid := uint32(unix.Geteuid())
	name := boardName(euid)
	fd := -1
	err := n.withRunDir(true, func(dirfd int) error {
		low, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
		if err != nil {
			return err
		}
		fd, err = unix.FcntlInt(uintptr(low), unix.F_DUPFD_CLOEXEC, fdhook.HighBase())
		unix.Close(low)
		if err == nil {
			fdhook.NoteFDs(fd)
		}
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("tenant board %s: %w", name, err)
	}
	if err = checkBoard(fd, euid); err == nil {
		if err = unix.Fchmod(fd, 0o600); err == nil { // whatever the umask left of it
			err = prepareBoard(fd)
		}
	}
	if err != nil {
		fdhook.CloseFD(fd)
		return -1, fmt.Errorf("tenant board %s: %w", name, err)
	}
	return fd, nil
}

// checkBoard applies OpenBoard's rule to the open file fd.
func checkBoard(fd int, euid uint32) error {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	switch {
	case err != nil:
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("not a regular file (mode %o)", st.Mode)
	case st.Uid != euid:
		err = fmt.Errorf("owned by uid %d, not %d", st.Uid, euid)
	case st.Mode&0o077 != 0:
		err = fmt.Errorf("mode %04o, want 0600", st.Mode&0o7777)
	case st.Nlink != 1:
		err = fmt.Errorf("%d links, want 1", st.Nlink)
	}
	return err
}

// prepareBoard lays out the board at fd when it is not laid out yet: it
// grows the file to the board's size and writes the header. Entries
// already there are kept (other processes of the user write theirs at any
// time); a header of another layout (another build) is overwritten, and
// the processes of that build read no board until they write theirs.
func prepareBoard(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < BoardSize {
		if err := unix.Ftruncate(fd, BoardSize); err != nil {
			return fmt.Errorf("grow to %d bytes: %w", BoardSize, err)
		}
	}
	want := make([]byte, 12)
	binary.LittleEndian.PutUint32(want[0:], BoardMagic)
	binary.LittleEndian.PutUint32(want[4:], BoardVersion)
	binary.LittleEndian.PutUint32(want[8:], BoardEntries)
	have := make([]byte, len(want))
	if n, err := unix.Pread(fd, have, 0); err == nil && n == len(have) && string(have) == string(want) {
		return nil
	}
	if n, err := unix.Pwrite(fd, want, 0); err != nil || n != len(want) {
		return fmt.Errorf("write the header: %d bytes, %v", n, err)
	}
	return nil
}

// ReadBoard returns what the tenant board at fd holds. Another process
// may write anything there: the values are as read.
func ReadBoard(fd int) (Board, error) {
	b := make([]byte, BoardSize)
	if n, err := unix.Pread(fd, b, 0); err != nil || n != len(b) {
		return Board{}, fmt.Errorf("tenant board: read %d of %d bytes: %v", n, len(b), err)
	}
	return decodeBoard(b)
}

// decodeBoard decodes a board's bytes (BoardSize of them).
func decodeBoard(b []byte) (Board, error) {
	le := binary.LittleEndian
	if len(b) < BoardSize || le.Uint32(b[0:]) != BoardMagic || le.Uint32(b[4:]) != BoardVersion || le.Uint32(b[8:]) != BoardEntries {
		return Board{}, ErrNoBoard
	}
	out := Board{StarvedPID: int(le.Uint32(b[BoardStarved:])), StarvedAt: time.Duration(int64(le.Uint64(b[BoardStarved+4:])))}
	for i := range BoardEntries {
		e := b[BoardHeader+i*BoardEntry:]
		if pid := le.Uint32(e); pid != 0 {
			out.Entries = append(out.Entries, TenantEntry{PID: int(pid), Demand: int(le.Uint32(e[4:])), Beat: time.Duration(int64(le.Uint64(e[8:])))})
		}
	}
	return out, nil
}

// Bytes is e as a board holds it (BoardEntry bytes): what the C side
// writes for its process, and what tests write for others.
func (e TenantEntry) Bytes() []byte {
	b := make([]byte, BoardEntry)
	binary.LittleEndian.PutUint32(b, uint32(e.PID))
	binary.LittleEndian.PutUint32(b[4:], uint32(e.Demand))
	binary.LittleEndian.PutUint64(b[8:], uint64(e.Beat))
	return b
}

// WriteEntry writes e as entry i of the board at fd.
func WriteEntry(fd, i int, e TenantEntry) error {
	_, err := unix.Pwrite(fd, e.Bytes(), int64(BoardHeader+i*BoardEntry))
	return err
}

// WriteStarved writes the board's starved mark at fd: pid's small message
// was late at at, as the C side writes it for its process (tests write
// other processes').
func WriteStarved(fd, pid int, at time.Duration) error {
	b := make([]byte, BoardStarvedSize)
	binary.LittleEndian.PutUint32(b, uint32(pid))
	binary.LittleEndian.PutUint64(b[4:], uint64(at))
	_, err := unix.Pwrite(fd, b, BoardStarved)
	return err
}

// ReadBoardIn reads the tenant board of effective uid euid in run
// directory dir (opened without following a symlink, read only); an
// error when it is missing or not a board.
func ReadBoardIn(dir string, euid int) (Board, error) {
	fd, err := unix.Open(filepath.Join(dir, boardName(uint32(euid))), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return Board{}, err
	}
	defer unix.Close(fd)
	if err := checkBoard(fd, uint32(euid)); err != nil {
		return Board{}, err
	}
	return ReadBoard(fd)
}
