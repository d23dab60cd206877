package rendezvous

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSockPath is sun_path's size less its NUL.
const maxSockPath = 107

// errNoRunDir: the run directory does not exist (and was not to be
// created); nobody has registered, so no peer is shimmed.
var errNoRunDir = errors.New("run directory does not exist")

// EnsureRunDir creates the run directory dir when missing (mode 0700,
// missing parents too) and checks it as openRunDir does. It is the one
// check of a run directory: the rendezvous node, the stats server and the
// configuration all use it. Errors carry ReasonRunDir.
func EnsureRunDir(dir string) error {
	fd, err := openRunDir(dir, true)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// openRunDir opens the run directory and checks it (checkRunDirFD): a
// real directory (not a symlink), private or shared. With create it makes
// a missing directory (mode 0700; missing parents 0700 too). The checks
// are made on the opened fd, so the directory used is the one checked;
// callers use *at calls on the returned fd and close it. Errors carry
// ReasonRunDir, except a missing directory without create (errNoRunDir,
// ReasonNotShimmed).
func openRunDir(dir string, create bool) (int, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return -1, &FallbackError{ReasonRunDir, fmt.Errorf("run directory %q: not a clean absolute path", dir)}
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags, 0)
	if err == unix.ENOENT {
		if !create {
			return -1, &FallbackError{ReasonNotShimmed, fmt.Errorf("%s: %w", dir, errNoRunDir)}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return -1, &FallbackError{ReasonRunDir, fmt.Errorf("create run directory %s: %w", dir, err)}
		}
		fd, err = unix.Open(dir, flags, 0)
	}
	if err != nil {
		return -1, &FallbackError{ReasonRunDir, fmt.Errorf("open run directory %s: %w", dir, err)}
	}
	if err := checkRunDirFD(fd, dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkRunDirFD is the one rule for a run directory. Either private:
// owned by the effective uid, no permission bits for group or others
// (0700, what EnsureRunDir creates). Or shared between uids that trust
// each other (containers of different uids on one host; the node agent
// prepares it): owned by root or the effective uid, nothing for others,
// the sticky bit set (so no member can remove or replace another's files)
// and its group one of the process's groups (or the process is root:
// the node agent, `sdpshim stats`). Only members of that group
// reach what is inside; SDPSHIM_ALLOW_UIDS (SO_PEERCRED) still decides
// who may rendezvous or read stats.
func checkRunDirFD(fd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("stat run directory %s: %w", dir, err)}
	}
	euid := unix.Geteuid()
	perm := st.Mode & 0o7777
	var err error
	switch {
	case int(st.Uid) != euid && st.Uid != 0:
		err = fmt.Errorf("run directory %s is owned by uid %d, not %d or root", dir, st.Uid, euid)
	case perm&0o077 == 0 && int(st.Uid) == euid:
		return nil // private
	case perm&0o007 != 0 || perm&0o070 == 0:
		err = fmt.Errorf("run directory %s has mode %04o, want 0700, or 3770 when shared (no access for others)", dir, perm)
	case perm&unix.S_ISVTX == 0:
		err = fmt.Errorf("run directory %s has mode %04o: shared with its group without the sticky bit (want 3770)", dir, perm)
	case !inGroup(st.Gid) && euid != 0: // root enters any directory
		err = fmt.Errorf("run directory %s is shared with group %d, not one of this process's groups", dir, st.Gid)
	default:
		return nil // shared
	}
	return &FallbackError{ReasonRunDir, err}
}

// sharedRunDir reports whether the checked run directory dirfd is shared
// with its group (checkRunDirFD): what a node creates there is then
// readable (entries, records) and connectable (sockets) by the group.
func sharedRunDir(dirfd int) bool {
	var st unix.Stat_t
	return unix.Fstat(dirfd, &st) == nil && st.Mode&0o070 != 0
}

// inGroup reports whether gid is the effective gid or a supplementary
// group of the process.
func inGroup(gid uint32) bool {
	if int(gid) == unix.Getegid() {
		return true
	}
	groups, err := unix.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if uint32(g) == gid {
			return true
		}
	}
	return false
}
