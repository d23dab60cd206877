package rendezvous

import (
	"time"

	"golang.org/x/sys/unix"
)

// modes returns the modes of what a node creates in the run directory
// dirfd: private to the uid, or (a shared run directory, rundir.go) open
// to the group, whose members may then read entries and records and
// connect to sockets; SO_PEERCRED still decides who may rendezvous.
func modes(dirfd int) (file, sock uint32) {
	if sharedRunDir(dirfd) {
		return 0o640, 0o660
	}
	return 0o600, 0o600
}

// staleTempAge is the age after which a temporary file (tempName) is
// surely abandoned: one is written and renamed within microseconds.
const staleTempAge = time.Minute

// socketState is what a probe of a rendezvous socket found.
type socketState int

const (
	socketLive    socketState = iota // a server accepts on it (or its backlog is full)
	socketDead                       // no server: refused, or the file is gone
	socketUnknown                    // cannot tell (permissions, resources)
)

// probeSocket tells whether a server still listens on the unix socket
// path, whatever pid namespace it runs in: a connect to a socket nobody
// listens on is refused. The probe sends nothing; a server sees a
// connection closed before a frame and ignores it (errClosedIdle).
func probeSocket(path string) socketState {
	if len(path) > maxSockPath {
		return socketUnknown
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return socketUnknown
	}
	defer unix.Close(fd)
	switch err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err {
	case nil, unix.EAGAIN:
		return socketLive
	case unix.ECONNREFUSED, unix.ENOENT:
		return socketDead
	}
	return socketUnknown
}

// staleTemp reports whether name in dirfd is a temporary file (tempName)
// surely abandoned: older than staleTempAge.
func staleTemp(dirfd int, name string) bool {
	_, ok := parseTempName(name)
	return ok && fileAge(dirfd, name) > staleTempAge
}

// fileAge returns how long ago name (relative to dirfd) was last
// modified, or 0 when it cannot be stat'ed.
func fileAge(dirfd int, name string) time.Duration {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0
	}
	return statAge(st)
}

// statAge returns how long ago the file st describes was last modified.
func statAge(st unix.Stat_t) time.Duration { return time.Since(time.Unix(st.Mtim.Unix())) }
