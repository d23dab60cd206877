package rendezvous

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/random"
)

// Deferred acceptance ("the first user claims"). A group listener (Entry
// .Group: its fd is shared with fork children) cannot answer offers: the
// kernel, not the shim, picks the process whose accept() gets a
// connection, and that process may not be the one that uses it (a
// postmaster accepts, its fork child serves). So the connector defers:
//
//  1. It calls Defer before its connect(): its rendezvous server runs
//     (Serve) and a record file named by the 4-tuple says who it is; a
//     socket whose port the connect() picks has its record filed under
//     a pending name until then (BindDeferred, unboundrec.go).
//  2. The process that first uses the accepted fd finds the record
//     (FindDeferred) and calls Pull: a PULL message to the connector's
//     server asks it to offer the connection to the puller, exactly as
//     to a listener; the connector's OnPull makes that offer, committed,
//     on the PULL's own connection (PullRequest.OfferHere), or to the
//     puller's server before it answers, so Pull ends with a Claim.
//  3. The connector alone decides between a PULL and its own deadline
//     (the shim's), so both ends always agree; an offer the puller gave up
//     on is refused or dropped (abandoned tuples), which declines it.
//
// A record file lives in the run directory's subdirectory records/
// (recordDir) under the name d<server>-<client> (the canonical Tuple, the
// client's address possibly the wildcard [::]), is written like an entry
// file (temporary file, then rename) and holds:
//
//	sdpshim-deferred 1
//	pid 1234
//	start 5678
//	uid 1000
//	pidns pid:[4026531836]
//	netns net:[4026531840]
//	socket /run/user/1000/sdpshim/p1234-0a1b2c3d.sock
//	nonce 00112233445566778899aabbccddeeff
//
// Any deviation makes it garbage (removed, as are records of dead pids).
//
// Through a NAT (a Kubernetes service address that kube-proxy DNATs to a
// pod) the connector does not know the destination the acceptor sees, so
// DeferNAT files the record as n<client> instead: the connector's bound,
// specific source address and port, which is what the acceptor's
// getpeername sees when the NAT rewrites only the destination. Nothing
// names the destination dialled. A source NAT breaks the match: the
// acceptor then finds no record and both ends stay on kernel TCP.

// Record is a deferred connection as FindDeferred found it.
type Record struct {
	// Tuple is the connection as the connector named it (its client
	// address may be the wildcard).
	Tuple Tuple
	// PID, Start, UID and Socket identify the connector process and its
	// rendezvous server.
	PID    int
	Start  uint64
	UID    uint32
	Socket string
	// Nonce is the connector's secret for this connection: a PULL must
	// carry it.
	Nonce [16]byte

	pidns string // the connector's pid namespace: where PID means something
}

// Deferral is the connector's handle on its record (Defer, Undefer).
type Deferral struct {
	Tuple Tuple
	Nonce [16]byte
	// NAT: filed by the client alone (DeferNAT); the puller's tuple names
	// a destination the connector did not dial.
	NAT     bool
	name    string
	pending bool // filed under a pending name until BindDeferred (unboundrec.go)
}

// Pending reports whether d's record waits for BindDeferred.
func (d Deferral) Pending() bool { return d.pending }

const recordHeader = "sdpshim-deferred 1"

// recordName is d<server>-<client> of the canonical tuple.
func recordName(t Tuple) string {
	t = t.canon()
	return "d" + t.Server.String() + "-" + t.Client.String()
}

// natRecordName is n<client> of a canonical, specific client address.
func natRecordName(client netip.AddrPort) string {
	return "n" + canon(client).String()
}

// parseRecordName returns the tuple a record name stands for (for a NAT
// record, only its client).
func parseRecordName(name string) (Tuple, bool) {
	if rest, found := strings.CutPrefix(name, "n"); found {
		c, err := netip.ParseAddrPort(rest)
		if err != nil || c.Port() == 0 || c.Addr().IsUnspecified() || natRecordName(c) != name {
			return Tuple{}, false
		}
		return Tuple{Client: c}, true
	}
	rest, found := strings.CutPrefix(name, "d")
	if !found {
		return Tuple{}, false
	}
	srv, cli, found := strings.Cut(rest, "-")
	if !found {
		return Tuple{}, false
	}
	s, err1 := netip.ParseAddrPort(srv)
	c, err2 := netip.ParseAddrPort(cli)
	t := Tuple{Client: c, Server: s}
	if err1 != nil || err2 != nil || !t.valid() || recordName(t) != name {
		return Tuple{}, false
	}
	return t, true
}

type recordFile struct {
	owner
	nonce [16]byte
}

func (r *recordFile) encode() []byte {
	var b bytes.Buffer
	b.WriteString(recordHeader + "\n")
	r.owner.encode(&b)
	fmt.Fprintf(&b, "nonce %s\n", hex.EncodeToString(r.nonce[:]))
	return b.Bytes()
}

// parseRecordFile parses the record file called name in rundir.
func parseRecordFile(rundir, name string, b []byte) (recordFile, error) {
	var r recordFile
	lines := strings.Split(string(b), "\n")
	if len(lines) != 9 || lines[0] != recordHeader || lines[8] != "" {
		return r, fmt.Errorf("record %s: bad header, ending or line count", name)
	}
	keys := append(ownerKeys[:len(ownerKeys):len(ownerKeys)], "nonce")
	for i, line := range lines[1:8] {
		key, val, found := strings.Cut(line, " ")
		if !found || key != keys[i] {
			return r, fmt.Errorf("record %s: line %q", name, line)
		}
		known, err := r.parseLine(key, val)
		if !known { // the nonce
			var n []byte
			n, err = hex.DecodeString(val)
			if err == nil && len(n) != len(r.nonce) {
				err = fmt.Errorf("nonce of %d bytes", len(n))
			}
			copy(r.nonce[:], n)
		}
		if err != nil {
			return r, fmt.Errorf("record %s: %s: %w", name, key, err)
		}
	}
	if !isSockOf(rundir, r.socket, r.pid) {
		return r, fmt.Errorf("record %s: socket %q", name, r.socket)
	}
	return r, nil
}

// Defer publishes that this process is about to connect on t (its socket
// bound, t.Client maybe the wildcard) to a group listener and will wait
// for a PULL: it starts the rendezvous server if none runs and writes the
// record file. A socket not bound yet (t.Client's port 0) gets a pending
// record, which BindDeferred names once the connect() picked the port
// (unboundrec.go); sock is then that socket, whose identity the name
// carries. Call Undefer once the connection is resolved (pulled, fallen
// back, closed). Errors are *FallbackError (ReasonRunDir,
// ReasonProtocol).
func (n *Node) Defer(t Tuple, sock int) (Deferral, error) {
	if t.unbound() {
		ino := socketID(t, sock)
		if !t.validOffer(true) || ino == 0 {
			return Deferral{}, &FallbackError{ReasonProtocol, fmt.Errorf("defer %s: invalid tuple, or fd %d not a socket", t, sock)}
		}
		return n.deferAs(Deferral{Tuple: t, name: pendingRecordName(t.Server, n.pid, ino), pending: true})
	}
	if !t.valid() {
		return Deferral{}, &FallbackError{ReasonProtocol, fmt.Errorf("defer %s: invalid tuple", t)}
	}
	return n.deferAs(Deferral{Tuple: t, name: recordName(t)})
}

// DeferNAT is Defer for a destination behind a NAT (deferred.go's note):
// the record is filed by t.Client alone, which must be a specific address
// (the socket bound to the source address its route uses), and a PULL
// from any local address is taken.
func (n *Node) DeferNAT(t Tuple) (Deferral, error) {
	if !t.valid() || t.Client.Addr().IsUnspecified() {
		return Deferral{}, &FallbackError{ReasonProtocol, fmt.Errorf("defer %s: invalid tuple or wildcard source", t)}
	}
	return n.deferAs(Deferral{Tuple: t, NAT: true, name: natRecordName(t.Client)})
}

func (n *Node) deferAs(d Deferral) (Deferral, error) {
	if err := random.Read(d.Nonce[:]); err != nil {
		return Deferral{}, &FallbackError{ReasonRunDir, err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Deferral{}, &FallbackError{ReasonRunDir, ErrClosed}
	}
	if err := n.serveLocked(); err != nil {
		return Deferral{}, err
	}
	r := recordFile{owner: n.self(), nonce: d.Nonce}
	err := n.withRecordDir(true, func(dirfd int) error {
		return writeFileAt(dirfd, d.name, r.encode(), n.pid)
	})
	if err != nil {
		return Deferral{}, fallback(ReasonRunDir, err)
	}
	n.recs[d.name] = true
	n.stats.deferred.Add(1)
	return d, nil
}

// Undefer removes d's record file. Idempotent.
func (n *Node) Undefer(d Deferral) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || !n.recs[d.name] {
		return
	}
	delete(n.recs, d.name)
	n.withRecordDir(false, func(dirfd int) error {
		unix.Unlinkat(dirfd, d.name, 0)
		return nil
	})
}

// FindDeferred returns the record of the connection an accepted socket
// has (local: its getsockname, remote: its getpeername), filed under the
// exact 4-tuple, under the connector's port alone, or (DeferNAT) under
// the connector's address and port alone; while records of connections
// to local are pending, it waits a little for theirs (awaitBound). No
// record, a garbage one (removed) or one of a dead process (removed) is a
// *FallbackError with ReasonNotShimmed, ReasonProtocol or ReasonPeerGone.
func (n *Node) FindDeferred(local, remote netip.AddrPort) (Record, error) {
	key := Tuple{Client: remote, Server: local}.canon()
	var rec Record
	var ferr error
	err := n.withRecordDir(false, func(dirfd int) error {
		rec, ferr = n.findRecord(dirfd, key)
		var st unix.Stat_t
		if ReasonOf(ferr) == ReasonNotShimmed && unix.Fstat(dirfd, &st) == nil && statAge(st) < unboundFresh &&
			!n.pending.none(st, key.Server) {
			// A pending record is written into the directory, which
			// changes its modification time: none is fresh in a
			// directory unchanged for unboundFresh, nor new in one as
			// awaitBound last listed it.
			rec, ferr = n.awaitBound(dirfd, st, key)
		}
		return nil
	})
	if err != nil {
		ferr = fallback(ReasonRunDir, err)
	}
	if ferr != nil {
		n.stats.fallback(ferr)
	}
	return rec, ferr
}

// findRecord is one look for key's record (FindDeferred) in the record
// directory dirfd.
func (n *Node) findRecord(dirfd int, key Tuple) (Record, error) {
	var ferr error = &FallbackError{ReasonNotShimmed, fmt.Errorf("deferred %s: %w", key, ErrNoEntry)}
	for i, name := range []string{recordName(key), recordName(key.withAnyClient()), natRecordName(key.Client)} {
		if i == 2 && key.Client.Addr().IsUnspecified() {
			break
		}
		r, err := n.checkRecord(dirfd, name)
		if err == nil {
			t := key
			if i == 1 {
				t = key.withAnyClient()
			}
			return Record{Tuple: t, PID: r.pid, Start: r.start, UID: r.uid, Socket: r.socket, Nonce: r.nonce, pidns: r.pidns}, nil
		}
		if ReasonOf(err) != ReasonNotShimmed {
			ferr = err
		}
	}
	return Record{}, ferr
}

// checkRecord reads and checks the record file name, removing it when it
// is garbage or its process is gone. A record of another allowed uid
// counts (only this uid's are removed); one of another pid namespace is
// judged by its socket (probeSocket), since its pid cannot be.
func (n *Node) checkRecord(dirfd int, name string) (recordFile, error) {
	b, owner, err := readEntryFile(dirfd, name)
	var r recordFile
	switch {
	case err == unix.ENOENT:
		return r, &FallbackError{ReasonNotShimmed, ErrNoEntry}
	case err == nil && !n.removable(owner) && !n.allowed(owner):
		return r, &FallbackError{ReasonRefused, fmt.Errorf("record %s owned by uid %d: %w", name, owner, ErrUIDNotAllowed)}
	case err == nil:
		r, err = parseRecordFile(n.cfg.RunDir, name, b)
		if err == nil && r.uid != owner {
			err = fmt.Errorf("record %s: names uid %d, written by %d", name, r.uid, owner)
		}
	}
	if err != nil {
		if n.removable(owner) {
			n.stats.garbageEntries.Add(1)
			n.remove(dirfd, name)
		}
		return r, &FallbackError{ReasonProtocol, err}
	}
	dead := false
	if n.samePIDNS(r.owner) {
		st, start := processStart(r.pid)
		dead = st == procDead || (st == procAlive && start != r.start)
		if st != procAlive && !dead {
			return r, &FallbackError{ReasonPeerGone, fmt.Errorf("record %s: process %d unknown", name, r.pid)}
		}
	} else {
		dead = probeSocket(r.socket) == socketDead
	}
	if dead {
		if n.removable(owner) {
			n.stats.staleEntries.Add(1)
			n.remove(dirfd, name)
		}
		return r, &FallbackError{ReasonPeerGone, fmt.Errorf("record %s: process %d gone", name, r.pid)}
	}
	return r, nil
}

// writeFile writes name in the run directory atomically (writeFileAt).
// n.mu held.
func (n *Node) writeFile(name string, data []byte) error {
	return n.withRunDir(true, func(dirfd int) error {
		return writeFileAt(dirfd, name, data, n.pid)
	})
}

// writeFileAt writes name in the directory dirfd (the run directory or
// its record directory) atomically: a temporary file of process pid,
// then a rename over any old one.
func writeFileAt(dirfd int, name string, data []byte, pid int) error {
	tmp := tempName(pid, random32())
	fileMode, _ := modes(dirfd)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
	if err != nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("write %s: %w", name, err)}
	}
	err = unix.Fchmod(fd, fileMode) // whatever the umask
	if err == nil {
		err = writeAll(fd, data)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return &FallbackError{ReasonRunDir, fmt.Errorf("write %s: %w", name, err)}
	}
	return nil
}

// HasNATRecord reports whether a connector filed a NAT record for client
// (DeferNAT): the accepted connection from client is then to be pulled.
// One system call; false for a wildcard client or on any error.
func (n *Node) HasNATRecord(client netip.AddrPort) bool {
	if client.Addr().IsUnspecified() || !client.IsValid() {
		return false
	}
	var st unix.Stat_t
	name := filepath.Join(n.cfg.RunDir, recordDir, natRecordName(client))
	return unix.Lstat(name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// ListenersElsewhere reports whether a listener of another network
// namespace is registered in the run directory (a pod on this host that
// a NAT may forward to). It lists the directory: call it only for
// destinations that may be behind a NAT (SDPSHIM_SERVICES).
func (n *Node) ListenersElsewhere() bool {
	found := false
	n.withRunDir(false, func(dirfd int) error {
		names, err := readDirNames(dirfd)
		if err != nil {
			return err
		}
		for _, name := range names {
			if _, _, _, _, ok := parseEntryName(name); !ok {
				continue
			}
			if e, ok := n.checkEntry(dirfd, name); ok && !sameNamespace(e.netns, n.netns) {
				found = true
				return nil
			}
		}
		return nil
	})
	return found
}
