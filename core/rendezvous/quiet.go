package rendezvous

import (
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The run directory without deferral records. A process that accepts a
// connection asks whether its connector offered it; the answer "nobody
// did" holds for every connection accepted while the process holds no
// offer (Config.OnPending says how many it holds) and the run directory
// holds no deferral record, since a connector files both before its
// connect(). Quiet reports a state of the directory in which it held no
// record; the interposer compares the directory's state with it at each
// accept and keeps such a connection on kernel TCP without the core
// (preload/c/plainaccept.c). A state is reported only when the directory
// had been unchanged for stableAfter (lookupcache.go) before it was
// listed: a record written later moves its modification time, whatever
// the file system's timestamp granularity.

// DirState identifies a state of the run directory.
type DirState struct {
	Dev, Ino uint64
	Mtime    unix.Timespec
}

// quietCache is the last state Quiet listed.
type quietCache struct {
	mu    sync.Mutex
	stamp dirStamp // +checklocks:mu
	quiet bool     // +checklocks:mu; it held no record
}

// Quiet returns the run directory's state now and whether it holds no
// deferral record in it (false too when it is changing or unreadable).
// It lists the directory only when its state moved since the last call.
func (n *Node) Quiet() (DirState, bool) {
	before := stampRunDir(n.cfg.RunDir)
	st := DirState{Dev: before.dev, Ino: before.ino, Mtime: before.mtime}
	if !before.ok {
		return st, false
	}
	n.quiet.mu.Lock()
	defer n.quiet.mu.Unlock()
	if n.quiet.stamp == before {
		return st, n.quiet.quiet
	}
	if time.Since(time.Unix(before.mtime.Unix())) < stableAfter {
		return st, false // changing: ask again later
	}
	records := false
	err := n.withRunDir(false, func(dirfd int) error {
		names, err := readDirNames(dirfd)
		for _, name := range names {
			// d<server>-<client>, n<client> (deferred.go), or
			// anything that could be taken for one.
			if strings.HasPrefix(name, "d") || strings.HasPrefix(name, "n") {
				records = true
				break
			}
		}
		return err
	})
	if err != nil || stampRunDir(n.cfg.RunDir) != before {
		return st, false
	}
	n.quiet.stamp, n.quiet.quiet = before, !records
	return st, !records
}
