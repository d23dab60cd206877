package rendezvous

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// procState is what /proc/<pid>/stat says about a process.
type procState int

const (
	procDead    procState = iota // no such process, or a zombie
	procAlive                    // running (any state but Z and X)
	procUnknown                  // /proc unreadable: cannot tell
)

// processStart returns the state of pid and its start time (field 22 of
// /proc/<pid>/stat, clock ticks after boot). A pid that is alive with the
// same start time is the same process; a different start time means the
// pid was reused.
func processStart(pid int) (procState, uint64) {
	if pid <= 0 {
		return procDead, 0
	}
	b, err := readSmallFile(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid)+"/stat", 4096)
	if err == unix.ENOENT || err == unix.ESRCH {
		return procDead, 0
	}
	if err != nil {
		return procUnknown, 0
	}
	st, start, ok := parseStat(b)
	if !ok {
		return procUnknown, 0
	}
	if st == 'Z' || st == 'X' {
		return procDead, start
	}
	return procAlive, start
}

// StartTime returns the start time of pid (field 22 of /proc/PID/stat,
// clock ticks after boot) while it is alive; 0 when it is dead, a zombie,
// or its stat unreadable. With the pid it names a process across pid
// reuse.
func StartTime(pid int) uint64 {
	if st, start := processStart(pid); st == procAlive {
		return start
	}
	return 0
}

// parseStat extracts the state letter and start time from a stat line.
// The command name may hold spaces and parentheses, so fields are counted
// after its last ')'.
func parseStat(b []byte) (state byte, start uint64, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], start, true
}

var errTooBig = errors.New("file too large")

// readSmallFile reads at most limit bytes of the file name (relative to
// dirfd), refusing symlinks; a larger file is an error.
func readSmallFile(dirfd int, name string, limit int) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readLimited(fd, limit)
}

func readLimited(fd, limit int) ([]byte, error) {
	buf := make([]byte, limit+1)
	got := 0
	for got < len(buf) {
		n, err := unix.Read(fd, buf[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	if got > limit {
		return nil, errTooBig
	}
	return buf[:got], nil
}
