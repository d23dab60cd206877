package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxRunDir bounds SDPSHIM_RUNDIR so that a socket path inside it (a name
// of up to 27 bytes) fits sun_path (108 bytes with its NUL).
const maxRunDir = 80

// defaultRunDir derives the run directory for uid: /run/sdpshim for root;
// $XDG_RUNTIME_DIR/sdpshim for other users when that is an absolute path
// and short enough; /tmp/sdpshim-UID otherwise.
func defaultRunDir(uid int, lookup func(string) (string, bool)) string {
	if uid == 0 {
		return "/run/sdpshim"
	}
	if xdg, ok := lookup("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(xdg) {
		dir := filepath.Join(xdg, "sdpshim")
		if len(dir) <= maxRunDir {
			return dir
		}
	}
	return "/tmp/sdpshim-" + strconv.Itoa(uid)
}

// checkRunDir validates a SDPSHIM_RUNDIR value.
func checkRunDir(v string) (string, error) {
	if !filepath.IsAbs(v) || len(v) > maxRunDir {
		return "", errBad
	}
	return filepath.Clean(v), nil
}

// EnsureRunDir creates dir (and missing parents) with mode 0700 when it
// does not exist, then checks that it is a real directory (not a
// symlink), owned by the calling process's effective uid, and not
// writable by group or others, so that no other user can plant or replace
// sockets in it. It returns nil when dir is fit for use.
func EnsureRunDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sdpshim: run directory: %w", err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("sdpshim: run directory: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("sdpshim: run directory %s is not a directory", dir)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("sdpshim: run directory %s is not owned by uid %d", dir, os.Geteuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("sdpshim: run directory %s is writable by group or others (mode %04o)", dir, info.Mode().Perm())
	}
	return nil
}
