package rendezvous

import (
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The record directory without deferral records. A process that accepts
// a connection asks whether its connector offered it; the answer "nobody
// did" holds for every connection accepted while the process holds no
// offer (Config.OnPending says how many it holds) and the record
// directory (rundir.go, recordDir) holds no deferral record, since a
// connector files both before its connect(). Quiet reports a state of
// that directory in which it held no record; the interposer compares the
// directory's state with it at each accept and keeps such a connection
// on kernel TCP without the core (preload/c/plainaccept.c). A state is
// reported only when the directory had been unchanged for stableAfter
// (lookupcache.go) before it was listed: a record written later moves its
// modification time, whatever the file system's timestamp granularity.

// DirState identifies a state of the record directory.
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

// RecordDir is the record directory's path: the one Quiet's states are of.
func (n *Node) RecordDir() string { return filepath.Join(n.cfg.RunDir, recordDir) }

// Quiet returns the record directory's state now and whether it holds no
// deferral record (false too when it is changing, unreadable, or was
// missing: it is made then, when the run directory exists). It lists the
// directory only when its state moved since the last call.
func (n *Node) Quiet() (DirState, bool) {
	before := stampRunDir(n.RecordDir())
	st := DirState{Dev: before.dev, Ino: before.ino, Mtime: before.mtime}
	if !before.ok {
		n.withRunDir(false, func(top int) error {
			fd, err := openRecordDir(top, n.cfg.RunDir, true)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
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
	err := n.withRecordDir(false, func(dirfd int) error {
		// Anything in it is a record, or a file about to become one,
		// unless a writer that died left it (the sweep removes it).
		names, err := readDirNames(dirfd)
		for _, name := range names {
			if !staleTemp(dirfd, name) {
				records = true
				break
			}
		}
		return err
	})
	if err != nil || stampRunDir(n.RecordDir()) != before {
		return st, false
	}
	n.quiet.stamp, n.quiet.quiet = before, !records
	return st, !records
}
