package rendezvous

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory of the run directory's rule: never through a
// symlink.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// makeRecordDir makes the record directory (path) in the run directory
// top with top's access, private (0700) or shared (3770, top's group by
// its setgid bit), whole before it appears: made under a temporary name,
// given its mode, then renamed into place unless another process made it
// first. In a shared run directory only root makes it (the node agent:
// PrepareRunDir): one a member made would be that member's, which the
// other members' checks refuse, and whose files its owner could remove.
func makeRecordDir(top int, path string) error {
	shared := sharedRunDir(top)
	if shared && unix.Geteuid() != 0 {
		return &FallbackError{ReasonRunDir, fmt.Errorf("record directory %s missing from a shared run directory: the node agent makes it", path)}
	}
	tmp := tempName(unix.Getpid(), random32())
	if err := unix.Mkdirat(top, tmp, 0o700); err != nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("create record directory %s: %w", path, err)}
	}
	var err error
	if shared {
		var fd int
		if fd, err = unix.Openat(top, tmp, dirFlags, 0); err == nil {
			err = unix.Fchmod(fd, sharedDirMode)
			unix.Close(fd)
		}
	}
	if err == nil {
		err = unix.Renameat2(top, tmp, top, recordDir, unix.RENAME_NOREPLACE)
	}
	if err != nil {
		unix.Unlinkat(top, tmp, unix.AT_REMOVEDIR)
		if err != unix.EEXIST { // EEXIST: another process made it first
			return &FallbackError{ReasonRunDir, fmt.Errorf("create record directory %s: %w", path, err)}
		}
	}
	return nil
}

// sharedDirMode is a shared run directory's mode (checkRunDirFD): setgid,
// sticky, everything for owner and group, nothing for others.
const sharedDirMode = 0o700 | 0o070 | unix.S_ISGID | unix.S_ISVTX

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
	fd, err := unix.Open(dir, dirFlags, 0)
	if err == unix.ENOENT {
		if !create {
			return -1, &FallbackError{ReasonNotShimmed, fmt.Errorf("%s: %w", dir, errNoRunDir)}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return -1, &FallbackError{ReasonRunDir, fmt.Errorf("create run directory %s: %w", dir, err)}
		}
		fd, err = unix.Open(dir, dirFlags, 0)
	}
	return checked(fd, err, "run directory", dir)
}

// checked finishes the open (fd, err) of a directory of the run
// directory's rule, what at path: the open's error, else the rule
// (checkRunDirFD), closing fd when it fails.
func checked(fd int, err error, what, path string) (int, error) {
	if err != nil {
		return -1, &FallbackError{ReasonRunDir, fmt.Errorf("open %s %s: %w", what, path, err)}
	}
	if err := checkRunDirFD(fd, path); err != nil {
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

// recordDir is the run directory's subdirectory for deferral records
// (deferred.go). They come and go with every deferred connection, while
// the run directory itself changes only when a listener registers or
// leaves: the lookup cache (lookupcache.go), which keeps its answers while
// the run directory is unchanged, then survives a pre-fork server's
// clients, and a lookup lists listener entries only.
const recordDir = "records"

// withRecordDir calls f with the record directory open (openRecordDir),
// creating it, and the run directory, with create.
func (n *Node) withRecordDir(create bool, f func(dirfd int) error) error {
	return n.withRunDir(create, func(top int) error {
		open := func() (int, error) { return openRecordDir(top, n.cfg.RunDir, create) }
		return n.recDir.use(filepath.Join(n.cfg.RunDir, recordDir), open, f)
	})
}

// openRecordDir opens the record directory of the checked run directory
// top (named dir) and checks it by the run directory's rule
// (checkRunDirFD). With create it makes a missing one (makeRecordDir). A
// missing one without create is errNoRunDir (ReasonNotShimmed: nobody
// filed a record).
func openRecordDir(top int, dir string, create bool) (int, error) {
	path := filepath.Join(dir, recordDir)
	fd, err := unix.Openat(top, recordDir, dirFlags, 0)
	if err == unix.ENOENT {
		if !create {
			return -1, &FallbackError{ReasonNotShimmed, fmt.Errorf("%s: %w", path, errNoRunDir)}
		}
		if err := makeRecordDir(top, path); err != nil {
			return -1, err
		}
		fd, err = unix.Openat(top, recordDir, dirFlags, 0)
	}
	return checked(fd, err, "record directory", path)
}
