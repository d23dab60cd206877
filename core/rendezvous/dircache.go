package rendezvous

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// The run directory and its record directory stay open between uses. A
// use opened each (open, fstat, the rule's check, close: withRunDir,
// withRecordDir), and a deferred connection's setup used them about ten
// times across its two processes: a pre-fork server's connection made
// about 35 system calls for them alone. Now a use takes the descriptor it
// kept while the directory has the same owner and mode and is not
// removed (an fstat of the descriptor), while the path still names it
// (an fstatat without following a symlink, at most every dirRecheck),
// and while the process's effective ids are those it was checked with
// (read with the path); otherwise it opens and checks it afresh as
// before. A directory removed, or made open to others, is opened and
// checked again at its next use; one replaced under its path (renamed
// away, another renamed in its place) within dirRecheck of it. The
// descriptor it replaces is closed once no use holds it.

// dirRecheck bounds how long a use trusts the last look at the path: a
// directory renamed away and replaced takes at most this long to be
// noticed, and meanwhile its records go where nobody looks for them
// (those connections stay on kernel TCP, both ends agreeing). It also
// bounds how long a process that changed its effective ids uses a
// directory checked for the ones before; the kernel checks every access
// with the new ones anyway.
const dirRecheck = 100 * time.Millisecond

// dirCache keeps one directory open.
type dirCache struct {
	mu  sync.Mutex
	cur *openDir // +checklocks:mu; nil until the first use
}

// openDir is a kept directory descriptor and what it named when opened.
type openDir struct {
	fd    int
	dev   uint64
	ino   uint64
	mode  uint32
	uid   uint32
	euid  int       // the process's effective ids at the check: a process that
	egid  int       // changes them (a server dropping privileges) checks again
	named time.Time // +checklocks:dirCache.mu; when the path last named it
	uses  int       // +checklocks:dirCache.mu
	stale bool      // +checklocks:dirCache.mu; replaced: closed when uses ends
}

// use calls f with the directory at path open: the kept descriptor while
// path names what it was opened on, else one open returns (which must
// have checked it by the run directory's rule), kept from then on.
func (c *dirCache) use(path string, open func() (int, error), f func(dirfd int) error) error {
	d, err := c.acquire(path, open)
	if err != nil {
		return err
	}
	defer c.release(d)
	return f(d.fd)
}

// acquire returns the kept directory for path, opening it when path no
// longer names it (or never did), counted as in use.
func (c *dirCache) acquire(path string, open func() (int, error)) (*openDir, error) {
	if d := c.recent(); d != nil {
		return d, nil
	}
	var st unix.Stat_t
	named := unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	euid, egid := unix.Geteuid(), unix.Getegid()
	c.mu.Lock()
	if d := c.cur; d != nil && named && d.dev == st.Dev && d.ino == st.Ino && d.mode == st.Mode && d.uid == st.Uid &&
		d.euid == euid && d.egid == egid {
		d.uses++
		d.named = time.Now()
		c.mu.Unlock()
		return d, nil
	}
	c.mu.Unlock()
	fd, err := open()
	if err != nil {
		return nil, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &FallbackError{ReasonRunDir, err}
	}
	if hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, fdhook.HighBase()); err == nil {
		unix.Close(fd) // out of the low numbers programs size their tables by
		fd = hi
	}
	fdhook.NoteFDs(fd)
	d := &openDir{fd: fd, dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, euid: euid, egid: egid, named: time.Now(), uses: 1}
	c.swap(d)
	return d, nil
}

// recent returns the kept directory, counted as in use, when the path
// named it less than dirRecheck ago and the descriptor still shows it
// unchanged: the same owner and mode, not removed. nil: look at the path.
func (c *dirCache) recent() *openDir {
	c.mu.Lock()
	d := c.cur
	if d == nil || time.Since(d.named) >= dirRecheck {
		c.mu.Unlock()
		return nil
	}
	d.uses++ // held across the fstat: not closed under it
	c.mu.Unlock()
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) == nil && st.Nlink > 0 && st.Mode == d.mode && st.Uid == d.uid {
		return d
	}
	c.release(d)
	return nil
}

// swap makes d (nil: none) the kept directory; the one it replaces is
// closed now if no use holds it, else by its last use (release).
func (c *dirCache) swap(d *openDir) {
	c.mu.Lock()
	old := c.cur
	c.cur = d
	closeOld := old != nil && old.uses == 0
	if old != nil {
		old.stale = true
	}
	c.mu.Unlock()
	if closeOld {
		fdhook.CloseFD(old.fd)
	}
}

// release ends a use of d, closing it when it was replaced meanwhile and
// this was its last use.
func (c *dirCache) release(d *openDir) {
	c.mu.Lock()
	d.uses--
	closeIt := d.stale && d.uses == 0
	c.mu.Unlock()
	if closeIt {
		fdhook.CloseFD(d.fd)
	}
}

// close closes the kept descriptor (the Node's Close): uses still running
// keep theirs until they end.
func (c *dirCache) close() { c.swap(nil) }
