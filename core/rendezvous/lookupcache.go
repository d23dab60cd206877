package rendezvous

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The lookup cache. A connect() reads the run directory to find the
// destination's listener: open and check the directory, list it, read the
// matching entry files, check each owner's process in /proc (about ten
// system calls, 70 us of the connector's CPU on this machine, where the
// kernel's whole loopback connect takes about 40). A process that opens
// many connections to the same few addresses, shimmed or not, asks the
// same question each time. So the answer is kept, per destination, for as
// long as the directory stays as it was: one stat of it (device, inode,
// owner, mode, modification time) tells, since every change of an entry
// (a listener registering, closing, becoming a group listener, a sweep)
// creates, renames or removes a file in it.
//
// A change within the file system's timestamp granularity of the previous
// one would keep the modification time, so an answer is kept only when
// the directory had not changed for stableAfter before the lookup began.
// An entry whose process died without removing it is found out by the
// offer (its socket refuses), which forgets it and empties the cache.
type lookupCache struct {
	mu    sync.Mutex
	stamp dirStamp                   // the directory the answers were read from
	m     map[netip.AddrPort][]Entry // +checklocks:mu; a destination's entries (none: no shimmed listener)
}

// dirStamp identifies a state of the run directory.
type dirStamp struct {
	dev, ino  uint64
	uid, mode uint32
	mtime     unix.Timespec
	ok        bool
}

// stableAfter is how long the directory must have been unchanged before
// a lookup for its answer to be kept (well above any timestamp
// granularity of the file systems a run directory lives on).
const stableAfter = 50 * time.Millisecond

// maxCachedLookups bounds the destinations kept (a process connecting to
// many addresses refills it).
const maxCachedLookups = 1024

// stampRunDir stats the run directory without following a symlink.
func stampRunDir(dir string) dirStamp {
	var st unix.Stat_t
	if unix.Fstatat(unix.AT_FDCWD, dir, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return dirStamp{}
	}
	return stampOf(st)
}

// stampOf is the state of the directory st describes.
func stampOf(st unix.Stat_t) dirStamp {
	return dirStamp{dev: st.Dev, ino: st.Ino, uid: st.Uid, mode: st.Mode, mtime: st.Mtim, ok: true}
}

// get returns the kept answer for dst while the directory is as stamp
// says.
func (c *lookupCache) get(stamp dirStamp, dst netip.AddrPort) ([]Entry, bool) {
	if !stamp.ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp != stamp {
		return nil, false
	}
	e, ok := c.m[dst]
	return slices.Clone(e), ok
}

// put keeps entries as dst's answer, read from the directory between the
// stamps before and after (at the start time began): only when both agree
// and the directory was stable then.
func (c *lookupCache) put(before, after dirStamp, began time.Time, dst netip.AddrPort, entries []Entry) {
	if !before.ok || before != after || began.Sub(time.Unix(before.mtime.Unix())) < stableAfter {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp != before || len(c.m) >= maxCachedLookups {
		c.stamp = before
		c.m = map[netip.AddrPort][]Entry{}
	}
	c.m[dst] = entries
}

// clear forgets every answer.
func (c *lookupCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp = dirStamp{}
	c.m = nil
}
