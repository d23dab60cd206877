package stats

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Stats socket names. A process of the host's initial pid namespace
// serves stats-<pid>.sock, as `sdpshim stats PID` expects; one of another
// pid namespace (a container: every one has a pid 1) serves
// stats-<pid>.<ns>.sock, ns being the inode of its pid namespace, so
// names never collide in a run directory shared between containers.

// initPIDNS is the inode of the initial pid namespace (the kernel's
// PROC_PID_INIT_INO).
const initPIDNS = 0xEFFFFFFC

// SockName is the stats socket's file name of pid in the initial pid
// namespace.
func SockName(pid int) string { return fmt.Sprintf("stats-%d.sock", pid) }

// SockNameNS is the stats socket's file name of pid in the pid namespace
// whose inode is ns (SockName for the initial one).
func SockNameNS(pid int, ns uint64) string {
	if ns == initPIDNS || ns == 0 {
		return SockName(pid)
	}
	return fmt.Sprintf("stats-%d.%d.sock", pid, ns)
}

// ownSockName is this process's stats socket name.
func ownSockName() string { return SockNameNS(os.Getpid(), ownPIDNS()) }

// ownPIDNS returns the inode of the caller's pid namespace, 0 if unknown.
// A process's own pid namespace never changes (unshare and setns change
// its children's), so it is read once: a sweep asks for every entry.
var ownPIDNS = sync.OnceValue(func() uint64 {
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
})

// parseSockName parses a stats socket name: the pid and the inode of its
// pid namespace (initPIDNS for a plain stats-<pid>.sock).
func parseSockName(name string) (pid int, ns uint64, ok bool) {
	s, ok := strings.CutPrefix(name, "stats-")
	if !ok {
		return 0, 0, false
	}
	if s, ok = strings.CutSuffix(s, ".sock"); !ok {
		return 0, 0, false
	}
	p, nsText, hasNS := strings.Cut(s, ".")
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return 0, 0, false
	}
	if !hasNS {
		return pid, initPIDNS, true
	}
	ns, err = strconv.ParseUint(nsText, 10, 64)
	if err != nil || strconv.FormatUint(ns, 10) != nsText || ns == initPIDNS || ns == 0 {
		return 0, 0, false
	}
	return pid, ns, true
}

// live reports whether the stats socket at path, of pid in pid namespace
// ns, may have a server: a pid of this namespace is checked with kill(0)
// (a process of another user counts); any other by connecting, which a
// socket nobody serves refuses.
func live(path string, pid int, ns uint64) bool {
	if own := ownPIDNS(); ns == own || (own == 0 && ns == initPIDNS) {
		return unix.Kill(pid, 0) != unix.ESRCH
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil || len(path) > 107 {
		return true
	}
	defer unix.Close(fd)
	err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	return err != unix.ECONNREFUSED && err != unix.ENOENT
}

// socketMode is the mode of the stats socket in rundir: 0600, or 0660 in
// a run directory shared with its group (core/rendezvous's rule), whose
// members are the uids SDPSHIM_ALLOW_UIDS may name; SO_PEERCRED decides.
func socketMode(rundir string) os.FileMode {
	var st unix.Stat_t
	if unix.Stat(rundir, &st) == nil && st.Mode&0o070 != 0 {
		return 0o660
	}
	return 0o600
}
