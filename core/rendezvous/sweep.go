package rendezvous

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Sweep removes from the run directory dir what dead processes left
// there, by the rule every Node's server applies when it starts (sweep):
// entry and record files of dead processes, abandoned temporary files and
// rendezvous sockets nobody serves, whatever pid namespace wrote them.
// Unlike a Node, which removes only its own uid's files, Sweep removes
// the leftovers of every uid the caller may unlink: for root (the node
// agent) that is all of them. It returns how many files it removed. A
// missing dir is no error (nothing was left).
func Sweep(dir string) (removed uint64, err error) {
	n, err := New(Config{RunDir: dir})
	if err != nil {
		return 0, err
	}
	n.sweeper = true
	defer n.recDir.close() // a Node of its own, never closed: its kept directories go
	defer n.runDir.close()
	err = n.withRunDir(false, func(dirfd int) error {
		n.sweep(dirfd)
		return nil
	})
	if ReasonOf(err) == ReasonNotShimmed {
		err = nil // errNoRunDir
	}
	return n.stats.removed.Load(), err
}

// removable reports whether this Node removes the leftovers of uid: its
// own, or every uid's for Sweep.
func (n *Node) removable(uid uint32) bool { return uid == n.euid || n.sweeper }

// remove unlinks name in the run directory, counting it: a file, or an
// empty directory (a record directory whose making was cut short,
// makeRecordDir).
func (n *Node) remove(dirfd int, name string) {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	}
	if err == nil {
		n.stats.removed.Add(1)
	}
}

// PrepareRunDir makes dir a run directory by the rule of checkRunDirFD,
// creating it (and missing parents, mode 0755) when needed, and returns
// it checked, with its record directory (rundir.go, recordDir) made the
// same way. With gid < 0 it is private to the caller (mode 0700); else
// it is shared with group gid: owned by the caller (root, for the node
// agent), mode 3770 (setgid, sticky, nothing for others), so that
// processes of any uid that have gid among their groups can use it and
// none can remove another's files. An existing directory is changed to
// that; a symlink is refused. Errors carry ReasonRunDir.
func PrepareRunDir(dir string, gid int) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return &FallbackError{ReasonRunDir, fmt.Errorf("run directory %q: not a clean absolute path", dir)}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("create %s: %w", filepath.Dir(dir), err)}
	}
	fd, err := prepareDir(unix.AT_FDCWD, dir, dir, gid)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	rfd, err := prepareDir(fd, recordDir, filepath.Join(dir, recordDir), gid)
	if err == nil {
		unix.Close(rfd)
	}
	return err
}

// prepareDir makes the directory name (path, for errors) in dirfd as
// PrepareRunDir says and returns it open and checked.
func prepareDir(dirfd int, name, path string, gid int) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && err != unix.EEXIST {
		return -1, &FallbackError{ReasonRunDir, fmt.Errorf("create %s: %w", path, err)}
	}
	fd, err := unix.Openat(dirfd, name, dirFlags, 0)
	if err != nil {
		return -1, &FallbackError{ReasonRunDir, fmt.Errorf("open %s: %w", path, err)}
	}
	mode, group := uint32(0o700), -1
	if gid >= 0 {
		mode, group = sharedDirMode, gid
	}
	// Owner and group first: a chown clears the setgid bit.
	if err = unix.Fchown(fd, unix.Geteuid(), group); err != nil {
		err = &FallbackError{ReasonRunDir, fmt.Errorf("chown %s: %w", path, err)}
	} else if err = unix.Fchmod(fd, mode); err != nil {
		err = &FallbackError{ReasonRunDir, fmt.Errorf("chmod %s: %w", path, err)}
	} else {
		err = checkRunDirFD(fd, path)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
