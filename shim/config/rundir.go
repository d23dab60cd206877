package config

import (
	"path/filepath"
	"strconv"
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
