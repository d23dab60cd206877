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

// openRunDir opens the run directory and checks it: a real directory (not
// a symlink), owned by the effective uid, with no permission bits for
// group or others (0700, the one rule). With create it makes a missing
// directory (mode 0700; missing parents 0700 too). The checks are made on the opened fd, so the directory used
// is the one checked; callers use *at calls on the returned fd and close
// it. Errors carry ReasonRunDir, except a missing directory without create
// (errNoRunDir, ReasonNotShimmed).
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

func checkRunDirFD(fd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("stat run directory %s: %w", dir, err)}
	}
	if euid := unix.Geteuid(); int(st.Uid) != euid {
		return &FallbackError{ReasonRunDir, fmt.Errorf("run directory %s is owned by uid %d, not %d", dir, st.Uid, euid)}
	}
	if perm := st.Mode & 0o7777; perm&0o077 != 0 {
		return &FallbackError{ReasonRunDir, fmt.Errorf("run directory %s has mode %04o, want 0700 (no group or other access)", dir, perm)}
	}
	return nil
}
