package rendezvous

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Unbound records: the deferral's counterpart of unbound offers
// (unbound.go). A connector that bound its socket before connect(), to
// name the 4-tuple in its record, took a port no other socket may hold,
// TIME_WAIT included: a client that opened deferred connections faster
// than TIME_WAIT turns the ephemeral range over slowed down (the kernel's
// search for a free port) and then ran out of ports, where kernel TCP,
// which shares a port among destinations, does not. So Defer takes a
// tuple whose client port is 0: the record is filed under a pending name,
// u<server>-<pid>-<random>, before the connect() (so a process that
// accepts sees a record directory that is not quiet, quiet.go), and
// BindDeferred renames it to its 4-tuple's name right after the connect()
// returned, before the program can write.
//
// The process that accepts may look first: the kernel completes a
// loopback connection inside the connector's connect(). FindDeferred,
// finding no record while records of connections to its address are
// pending and were written recently (unboundFresh), looks again after
// short pauses, up to unboundWait (awaitBound). When it gives up, the
// connection is plain there, and nobody pulls it: its connector falls
// back at its first kernel byte or its deadline (the shim's
// deferDeadline), so both ends agree, as for any connection nobody
// pulls.

// pendingRecordPrefix starts a pending record's name.
const pendingRecordPrefix = "u"

// pendingRecordName is u<server>-<pid>-<8 hex digits> (server canonical).
func pendingRecordName(server netip.AddrPort, pid int, random uint32) string {
	return fmt.Sprintf("%s%s-%d-%08x", pendingRecordPrefix, canon(server), pid, random)
}

// parsePendingRecordName returns the server a pending record's name
// names.
func parsePendingRecordName(name string) (netip.AddrPort, bool) {
	rest, found := strings.CutPrefix(name, pendingRecordPrefix)
	if !found {
		return netip.AddrPort{}, false
	}
	srv, tail, found := strings.Cut(rest, "-")
	if !found {
		return netip.AddrPort{}, false
	}
	pid, hex, found := strings.Cut(tail, "-")
	s, err := netip.ParseAddrPort(srv)
	if !found || err != nil || len(hex) != 8 || s.Port() == 0 || s.Addr().IsUnspecified() {
		return netip.AddrPort{}, false
	}
	id, err1 := strconv.ParseUint(pid, 10, 31)
	r, err2 := strconv.ParseUint(hex, 16, 32)
	if err1 != nil || err2 != nil || id == 0 || pendingRecordName(s, int(id), uint32(r)) != name {
		return netip.AddrPort{}, false
	}
	return s, true
}

// BindDeferred names the pending record of d (Defer of a tuple whose
// client port was 0) by its 4-tuple, client being the socket's address
// once its connect() was made: d is updated. A PULL can come from then
// on. Errors are *FallbackError (ReasonProtocol, ReasonRunDir); the
// pending record is gone then too.
func (n *Node) BindDeferred(d *Deferral, client netip.AddrPort) error {
	t := Tuple{Client: client, Server: d.Tuple.Server}
	if !d.pending || !t.valid() {
		n.Undefer(*d)
		return &FallbackError{ReasonProtocol, fmt.Errorf("bind deferral %s: not pending, or invalid tuple", t)}
	}
	name := recordName(t)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || !n.recs[d.name] {
		return &FallbackError{ReasonRunDir, fmt.Errorf("bind deferral %s: %w", t, ErrClosed)}
	}
	err := n.withRecordDir(false, func(dirfd int) error {
		return unix.Renameat(dirfd, d.name, dirfd, name)
	})
	if err != nil {
		delete(n.recs, d.name)
		n.withRecordDir(false, func(dirfd int) error {
			unix.Unlinkat(dirfd, d.name, 0)
			return nil
		})
		return fallback(ReasonRunDir, fmt.Errorf("bind deferral %s: %w", t, err))
	}
	delete(n.recs, d.name)
	n.recs[name] = true
	d.Tuple, d.name, d.pending = t, name, false
	return nil
}

// awaitBound looks for key's record (canonical) again while records of
// connections to key.Server are pending and fresh, after pauses doubling
// from 20 us to 1 ms, for at most unboundWait. It returns what the last
// look found (ReasonNotShimmed: nothing).
func (n *Node) awaitBound(dirfd int, key Tuple) (Record, error) {
	deadline := time.Now().Add(unboundWait)
	pause := 20 * time.Microsecond
	for {
		if !n.pendingTo(dirfd, key.Server) || time.Now().After(deadline) {
			// The last look, after the listing: a record renamed before
			// the listing (no longer pending there) is found here.
			return n.findRecord(dirfd, key)
		}
		// The connector's thread is between its connect() and its
		// rename: a pause, not a wake, since nothing rings when a file
		// is renamed; the thread here is the program's, in its accept()
		// or its first use of the connection.
		ts := unix.NsecToTimespec(int64(pause))
		unix.Nanosleep(&ts, nil)
		pause = min(2*pause, time.Millisecond)
		if rec, err := n.findRecord(dirfd, key); ReasonOf(err) != ReasonNotShimmed {
			return rec, err
		}
	}
}

// pendingTo reports whether the record directory dirfd holds a pending
// record of a connection to server (canonical) written less than
// unboundFresh ago: one older belongs to a connect() the kernel has not
// completed (a lost SYN, a full backlog), not to the connection accepted.
func (n *Node) pendingTo(dirfd int, server netip.AddrPort) bool {
	names, err := readDirNames(dirfd)
	if err != nil {
		return false
	}
	for _, name := range names {
		if s, ok := parsePendingRecordName(name); !ok || s != server {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			time.Since(time.Unix(st.Mtim.Sec, st.Mtim.Nsec)) < unboundFresh {
			return true
		}
	}
	return false
}
