package rendezvous

import "golang.org/x/sys/unix"

// fdShare is how many fds a process's rendezvous connections may hold at
// once on each side (accepted offers waiting for their accept, answers
// waiting for their verdict): an eighth of the soft RLIMIT_NOFILE, at
// least 8. Kernel TCP holds no fd for a connection waiting in a
// listener's backlog: past the share new connections stay on kernel TCP
// (ReasonFDLimit), so a program near its limit keeps its fds for its
// own accepts and sockets.
func fdShare() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur >= 1<<24 {
		return 1 << 21
	}
	return max(8, int(rl.Cur/8))
}
