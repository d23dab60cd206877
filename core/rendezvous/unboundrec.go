package rendezvous

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
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
// u<server>-<pid>-<socket inode>, before the connect() (so a process that
// accepts sees a record directory that is not quiet, quiet.go), and
// BindDeferred renames it to its 4-tuple's name right after the connect()
// returned, before the program can write.
//
// The process that accepts may look first: the kernel completes a
// loopback connection inside the connector's connect(). The pending name
// carries the inode of the connector's socket, and FindDeferred, finding
// no record while records of connections to its address are pending,
// asks the kernel which socket is at the other end of its connection, as
// for unbound offers (unbound.go): it waits for the rename of the pending
// record with that socket's inode, up to unboundOwnWait, and for no
// other. Where the kernel cannot say, it waits for the records to its
// address written recently (unboundFresh), up to unboundWait. Either
// wait lists the directory again after short pauses (awaitBound). When
// it gives up, the connection is plain there, and nobody pulls it: its
// connector falls back at its first kernel byte or its deadline (the
// shim's deferDeadline), so both ends agree, as for any connection
// nobody pulls.

// pendingRecordPrefix starts a pending record's name.
const pendingRecordPrefix = "u"

// pendingRecordName is u<server>-<pid>-<8 hex digits> (server canonical):
// the digits are the inode of the connector's socket (sockdiag.Inode),
// by which an acceptor that asked the kernel whose its connection is
// knows the record before it is renamed.
func pendingRecordName(server netip.AddrPort, pid int, ino uint32) string {
	return fmt.Sprintf("%s%s-%d-%08x", pendingRecordPrefix, canon(server), pid, ino)
}

// parsePendingRecordName returns the server a pending record's name
// names, and its connector's socket inode.
func parsePendingRecordName(name string) (server netip.AddrPort, ino uint32, ok bool) {
	rest, found := strings.CutPrefix(name, pendingRecordPrefix)
	if !found {
		return netip.AddrPort{}, 0, false
	}
	srv, tail, found := strings.Cut(rest, "-")
	if !found {
		return netip.AddrPort{}, 0, false
	}
	pid, hex, found := strings.Cut(tail, "-")
	s, err := netip.ParseAddrPort(srv)
	if !found || err != nil || len(hex) != 8 || s.Port() == 0 || s.Addr().IsUnspecified() {
		return netip.AddrPort{}, 0, false
	}
	id, err1 := strconv.ParseUint(pid, 10, 31)
	r, err2 := strconv.ParseUint(hex, 16, 32)
	if err1 != nil || err2 != nil || id == 0 || pendingRecordName(s, int(id), uint32(r)) != name {
		return netip.AddrPort{}, 0, false
	}
	return s, uint32(r), true
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

// awaitBound waits for key's record (canonical) while a record of its
// connection, or of a connection to key.Server that may be its, is
// pending: it lists the record directory (st: its state before), reads
// key's record once the listing names it, and otherwise pauses (doubling
// from 20 us to 1 ms) and lists again. Which pending records it waits
// for, and how long, is the unbound offers' rule (connector.awaits): the
// one whose socket the kernel says is the connection's, up to
// unboundOwnWait; where the kernel cannot say, the fresh ones to
// key.Server, up to unboundWait. It returns what it found
// (ReasonNotShimmed: nothing; ReasonConnectorLate: a record it waited
// for still pending at the end). A listing is made while the directory
// cannot change (one getdents for a directory this small, under its
// lock), so a record renamed meanwhile shows under one name or the other.
func (n *Node) awaitBound(dirfd int, st unix.Stat_t, key Tuple) (Record, error) {
	start := time.Now()
	pause := 20 * time.Microsecond
	names := map[string]bool{recordName(key): true, recordName(key.withAnyClient()): true, natRecordName(key.Client): true}
	type pendingRec struct {
		ino   uint32
		fresh bool
	}
	var who connector
	asked := false
	for {
		listed, err := readDirNames(dirfd)
		if err != nil {
			break
		}
		pending := map[netip.AddrPort]bool{}
		var toServer []pendingRec
		for _, name := range listed {
			if names[name] {
				return n.findRecord(dirfd, key)
			}
			s, ino, ok := parsePendingRecordName(name)
			if !ok {
				continue
			}
			// Written less than unboundFresh ago (an older one belongs to
			// a connect() the kernel has not completed: a lost SYN, a full
			// backlog, not a connection accepted now), or gone since the
			// listing (fileAge 0): renamed to its 4-tuple's name, which
			// the next listing shows.
			fresh := fileAge(dirfd, name) < unboundFresh
			pending[s] = pending[s] || fresh
			if s == key.Server {
				toServer = append(toServer, pendingRec{ino, fresh})
			}
		}
		n.pending.saw(dirfd, st, pending, n.pid)
		if len(toServer) > 0 && !asked {
			who, asked = askConnector(key), true
		}
		wait, own := false, false
		for _, r := range toServer {
			w, o := who.awaits(r.ino, true, r.fresh)
			wait, own = wait || w, own || o
		}
		if !wait {
			break
		}
		limit := unboundWait
		if own {
			limit = unboundOwnWait
		}
		if time.Since(start) > limit {
			return Record{}, &FallbackError{ReasonConnectorLate, fmt.Errorf("deferred %s: its record still pending after %v", key, limit)}
		}
		// The connector's thread is between its connect() and its
		// rename: a pause, not a wake, since nothing rings when a file
		// is renamed; the thread here is the program's, in its accept()
		// or its first use of the connection.
		ts := unix.NsecToTimespec(int64(pause))
		unix.Nanosleep(&ts, nil)
		pause = min(2*pause, time.Millisecond)
		if unix.Fstat(dirfd, &st) != nil {
			break
		}
	}
	return Record{}, &FallbackError{ReasonNotShimmed, fmt.Errorf("deferred %s: %w", key, ErrNoEntry)}
}

// pendingSeen is what awaitBound's last listing found: the servers with a
// fresh pending record, as of a state of the record directory. While the
// directory stays in that state, a connection to another server has no
// pending record to wait for, and FindDeferred lists nothing: a pre-fork
// server's plain connections, accepted while shimmed clients' deferrals
// come and go, would otherwise list the directory at every accept.
//
// A state is the directory's identity, modification time and size. A
// change within one timestamp tick of the one before may keep the time on
// kernels before 6.13, which stamp files with the clock of the last tick;
// since, a change after a stat always moves it (fine-grained timestamps).
// On such a file system (fineStamps), or on tmpfs, where a directory's
// size counts its entries, a listing is kept at once; elsewhere only when
// the directory had not changed for timestampTick before it, so that any
// later change has a later time.
type pendingSeen struct {
	mu      sync.Mutex
	stamp   dirStamp                // +checklocks:mu; the state listed
	size    int64                   // +checklocks:mu
	servers map[netip.AddrPort]bool // +checklocks:mu; servers with a fresh pending record then
	dir     [2]uint64               // +checklocks:mu; the record directory (device, inode) exact is of
	exact   bool                    // +checklocks:mu; its states tell every change (tmpfs, fineStamps)
}

// timestampTick bounds a file system's timestamp tick (a jiffy: 10 ms at
// HZ=100, the coarsest kernel setting).
const timestampTick = 10 * time.Millisecond

// none reports whether the record directory, in state st, is as last
// listed and held no fresh pending record to server then.
func (p *pendingSeen) none(st unix.Stat_t, server netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stamp.ok && p.stamp == stampOf(st) && p.size == st.Size && !p.servers[server]
}

// saw keeps a listing of the record directory dirfd, whose state was st
// before it, when its state tells any later change.
func (p *pendingSeen) saw(dirfd int, st unix.Stat_t, servers map[netip.AddrPort]bool, pid int) {
	id := [2]uint64{st.Dev, st.Ino}
	p.mu.Lock()
	exact, known := p.exact, p.dir == id
	p.mu.Unlock()
	if !known { // the first listing, or the run directory was replaced
		var fs unix.Statfs_t
		exact = unix.Fstatfs(dirfd, &fs) == nil && fs.Type == unix.TMPFS_MAGIC || fineStamps(dirfd, pid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dir, p.exact = id, exact
	if !exact && statAge(st) < timestampTick {
		p.stamp = dirStamp{}
		return
	}
	p.stamp, p.size, p.servers = stampOf(st), st.Size, servers
}

// fineStamps reports whether the file system of the directory dirfd gives
// a change made right after a stat a later modification time: three
// writes to a temporary file, each between two stats, all move it. With
// timestamps of the last tick, three in a row that each cross a tick are
// about one in (tick / write)^3, 10^8 here. The temporary file goes at
// once (and by the sweep, staleTemp, should this process die first).
func fineStamps(dirfd, pid int) bool {
	name := tempName(pid, random32())
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	defer unix.Unlinkat(dirfd, name, 0)
	defer unix.Close(fd)
	for range 3 {
		var before, after unix.Stat_t
		if unix.Fstat(fd, &before) != nil {
			return false
		}
		if _, err := unix.Write(fd, []byte{0}); err != nil || unix.Fstat(fd, &after) != nil || after.Mtim == before.Mtim {
			return false
		}
	}
	return true
}
