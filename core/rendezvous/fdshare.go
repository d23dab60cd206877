package rendezvous

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// fdShare is how many fds a process's rendezvous connections may hold at
// once on each side (accepted offers waiting for their accept, answers
// waiting for their verdict): an eighth of the soft RLIMIT_NOFILE, at
// least 8. Kernel TCP holds no fd for a connection waiting in a
// listener's backlog: past the share new connections stay on kernel TCP
// (ReasonFDLimit), so a program near its limit keeps its fds for its
// own accepts and sockets.
//
// Every offer and every filed one asks, so the limit is read at most
// every fdShareFresh: a program that raises or lowers it gets the new
// share within that time.
func fdShare() int {
	if c := fdShareCache.Load(); c != nil && time.Since(c.at) < fdShareFresh {
		return c.share
	}
	share := 1 << 21
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<24 {
		share = max(8, int(rl.Cur/8))
	}
	fdShareCache.Store(&fdShareRead{share: share, at: time.Now()})
	return share
}

// fdShareFresh is how long a reading of the limit stands.
const fdShareFresh = 100 * time.Millisecond

// fdShareRead is one reading of the share, and when (monotonic).
type fdShareRead struct {
	share int
	at    time.Time
}

var fdShareCache atomic.Pointer[fdShareRead]
