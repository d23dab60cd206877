package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/random"
)

// Register publishes that this process listens on addr (a shimmed
// listen()), starting the rendezvous server on first use. addr may be a
// wildcard (0.0.0.0 or ::, the latter matching IPv4 too, as a dual-stack
// socket). Registering the same address again counts a reference (several
// SO_REUSEPORT sockets in one process); Unregister releases one.
func (n *Node) Register(addr netip.AddrPort) error { return n.register(addr, false) }

// RegisterGroup is Register for a group listener's address (a listener
// fork children share): its entry file says so from the first write, so
// no connector ever finds it offering for itself (SetGroup, later, leaves
// a window in which one may).
func (n *Node) RegisterGroup(addr netip.AddrPort) error { return n.register(addr, true) }

func (n *Node) register(addr netip.AddrPort, group bool) error {
	if n.cfg.Handler == nil {
		return fmt.Errorf("rendezvous: register %s: no Handler configured", addr)
	}
	if addr.Port() == 0 || !addr.Addr().IsValid() {
		return fmt.Errorf("rendezvous: register %s: need an address and a port", addr)
	}
	addr = netip.AddrPortFrom(addr.Addr().Unmap().WithZone(""), addr.Port())
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return &FallbackError{ReasonRunDir, ErrClosed}
	}
	if err := n.serveLocked(); err != nil {
		return err
	}
	addrs := n.regs[addr.Port()]
	if addrs[addr] > 0 {
		addrs[addr]++
		return nil
	}
	next := map[netip.AddrPort]int{addr: 1}
	for a, c := range addrs {
		next[a] = c
	}
	wasGroup := n.groups[addr.Port()]
	if group {
		n.groups[addr.Port()] = true
	}
	if err := n.writeEntry(addr.Port(), next); err != nil {
		if !wasGroup {
			delete(n.groups, addr.Port())
		}
		return err
	}
	n.regs[addr.Port()] = next
	return nil
}

// Unregister withdraws one registration of addr (the listener closed).
// When the last address of a port goes, the port's entry file goes;
// offers already accepted stay pending until claimed or expired.
func (n *Node) Unregister(addr netip.AddrPort) error {
	addr = netip.AddrPortFrom(addr.Addr().Unmap().WithZone(""), addr.Port())
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	addrs := n.regs[addr.Port()]
	switch c := addrs[addr]; {
	case c == 0:
		return fmt.Errorf("rendezvous: unregister %s: not registered", addr)
	case c > 1:
		addrs[addr]--
		return nil
	}
	delete(addrs, addr)
	if len(addrs) > 0 {
		return n.writeEntry(addr.Port(), addrs)
	}
	delete(n.regs, addr.Port())
	delete(n.groups, addr.Port())
	return n.withRunDir(false, func(dirfd int) error {
		if err := unix.Unlinkat(dirfd, n.entryName(addr.Port()), 0); err != nil && err != unix.ENOENT {
			return fmt.Errorf("rendezvous: remove entry: %w", err)
		}
		return nil
	})
}

// SetGroup marks the registered port of addr as a group listener's: its
// entry file is rewritten with "mode group", so connectors defer instead
// of offering (deferred.go). It stays so until the port's last
// registration goes.
func (n *Node) SetGroup(addr netip.AddrPort) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	addrs := n.regs[addr.Port()]
	if len(addrs) == 0 {
		return fmt.Errorf("rendezvous: group %s: not registered", addr)
	}
	if n.groups[addr.Port()] {
		return nil
	}
	n.groups[addr.Port()] = true
	if err := n.writeEntry(addr.Port(), addrs); err != nil {
		delete(n.groups, addr.Port())
		return err
	}
	return nil
}

// IsGroup reports whether addr's port is registered as a group listener's.
func (n *Node) IsGroup(addr netip.AddrPort) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.groups[addr.Port()]
}

// writeEntry replaces the entry file of port with addrs (write a temporary
// file, then rename over the old one). n.mu held.
func (n *Node) writeEntry(port uint16, addrs map[netip.AddrPort]int) error {
	e := entryFile{owner: n.self(), port: port, group: n.groups[port], addrs: namespaceAddrs()}
	for a := range addrs {
		e.listens = append(e.listens, a)
	}
	slices.SortFunc(e.listens, netip.AddrPort.Compare)
	return n.writeFile(n.entryName(port), e.encode())
}

// entryName is the name of this node's entry file for port.
func (n *Node) entryName(port uint16) string { return entryName(port, n.pid, n.start, n.nsID) }

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func random32() uint32 {
	var b [4]byte
	random.Read(b[:]) // names carry the pid too: zeros still name a file
	return binary.LittleEndian.Uint32(b[:])
}

// Lookup returns the live listener processes registered for dst, a
// destination on this host: an entry matches when it registered dst's
// address, or a wildcard of dst's family (:: also matches IPv4) and dst is
// loopback or an address of a local interface. Entries of dead processes,
// of reused pids, and unparseable files are removed and counted. Entries
// whose address matches exactly come first, then by pid. With no match the
// error is a *FallbackError with ReasonNotShimmed; an unsafe run
// directory gives ReasonRunDir.
//
// An entry is a hint, not a promise: the listener may close before the
// Offer (it is then refused with ReasonNotShimmed, or ReasonPeerGone when
// the process died).
func (n *Node) Lookup(dst netip.AddrPort) ([]Entry, error) {
	key := netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	began := time.Now()
	stamp := stampRunDir(n.cfg.RunDir)
	entries, ok := n.lookups.get(stamp, key)
	var err error
	if !ok {
		entries, err = n.lookup(dst)
		if err == nil {
			n.lookups.put(stamp, stampRunDir(n.cfg.RunDir), began, key, entries)
		}
	}
	if err == nil && len(entries) == 0 {
		err = &FallbackError{ReasonNotShimmed, fmt.Errorf("%s: %w", dst, ErrNoEntry)}
	}
	if err != nil {
		n.stats.fallback(err)
		return nil, err
	}
	return entries, nil
}

func (n *Node) lookup(dst netip.AddrPort) ([]Entry, error) {
	dst = netip.AddrPortFrom(dst.Addr().Unmap().WithZone(""), dst.Port())
	if dst.Port() == 0 || !dst.Addr().IsValid() {
		return nil, nil
	}
	localKnown, local := false, false
	isLocal := func() bool {
		if !localKnown {
			localKnown, local = true, isLocalAddr(dst.Addr())
		}
		return local
	}
	var out []Entry
	exact := map[string]bool{} // by socket: pids repeat across namespaces
	err := n.withRunDir(false, func(dirfd int) error {
		names, err := readDirNames(dirfd)
		if err != nil {
			return &FallbackError{ReasonRunDir, fmt.Errorf("read run directory: %w", err)}
		}
		prefix := fmt.Sprintf("l%d-", dst.Port())
		for _, name := range names {
			if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
				continue
			}
			e, ok := n.checkEntry(dirfd, name)
			if !ok {
				continue
			}
			for _, l := range e.listens {
				if n.reaches(&e, l, dst, isLocal) {
					out = append(out, Entry{Listen: l, PID: e.pid, Start: e.start, UID: e.uid, Socket: e.socket, Group: e.group,
						OtherNetns: !sameNamespace(e.netns, n.netns), name: name, owned: e.uid == n.euid})
					exact[e.socket] = l.Addr() == dst.Addr()
					break
				}
			}
		}
		return nil
	})
	if errors.Is(err, errNoRunDir) {
		return nil, nil
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.OtherNetns != b.OtherNetns { // this namespace's listener first
			if b.OtherNetns {
				return -1
			}
			return 1
		}
		if exact[a.Socket] != exact[b.Socket] {
			if exact[a.Socket] {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	return out, err
}

// checkEntry reads and checks the entry file name, removing it when it is
// garbage or its process is gone. ok means a live, checkable entry. An
// entry written by another uid counts only when that uid is allowed (a
// shared run directory, rundir.go); only this uid's files are removed
// (a shared directory's sticky bit forbids the rest). An entry of another
// pid namespace cannot be judged by its pid: it counts until its socket
// refuses (Offer and the sweep find that out).
func (n *Node) checkEntry(dirfd int, name string) (e entryFile, ok bool) {
	b, owner, err := readEntryFile(dirfd, name)
	switch {
	case err == unix.ENOENT:
		return e, false // removed meanwhile
	case err == nil && !n.removable(owner) && !n.allowed(owner):
		return e, false // not a uid this process trusts
	case err == nil:
		e, err = parseEntryFile(n.cfg.RunDir, name, b)
		if err == nil && e.uid != owner {
			err = fmt.Errorf("entry %s: names uid %d, written by %d", name, e.uid, owner)
		}
	}
	if err != nil {
		if n.removable(owner) {
			n.stats.garbageEntries.Add(1)
			n.remove(dirfd, name)
		}
		return e, false
	}
	if !n.samePIDNS(e.owner) {
		return e, true
	}
	switch st, start := processStart(e.pid); {
	case st == procUnknown:
		return e, false
	case st == procDead || start != e.start:
		n.stats.staleEntries.Add(1)
		n.remove(dirfd, name)
		if _, base := splitSock(e.socket); base != "" && !n.pidLive(e.pid) {
			n.remove(dirfd, base)
		}
		return e, false
	}
	return e, true
}

// reaches reports whether a connection to dst (canonical) reaches the
// listener address l of entry e: in this network namespace as
// listenMatches says; in another (a pod's), when dst is l itself or, for
// a wildcard l of dst's family, one of the addresses e lists for its
// namespace. Loopback never reaches another namespace.
func (n *Node) reaches(e *entryFile, l, dst netip.AddrPort, local func() bool) bool {
	if sameNamespace(e.netns, n.netns) {
		return listenMatches(l, dst, local)
	}
	la, da := l.Addr().Unmap(), dst.Addr()
	switch {
	case l.Port() != dst.Port() || da.IsLoopback() || da.IsUnspecified():
		return false
	case !la.IsUnspecified():
		return la == da
	case la.Is4() && !da.Is4():
		return false
	}
	return slices.Contains(e.addrs, da)
}

// forget removes the entry e names after its socket refused (its process
// died, in a pid namespace where its pid could not be checked), when it
// is this uid's to remove.
func (n *Node) forget(e Entry) {
	n.lookups.clear()
	if e.name == "" || !e.owned {
		return
	}
	n.withRunDir(false, func(dirfd int) error {
		n.stats.staleEntries.Add(1)
		unix.Unlinkat(dirfd, e.name, 0)
		return nil
	})
}

// pidLive reports whether pid runs (any process, maybe a reused pid).
func (n *Node) pidLive(pid int) bool {
	st, _ := processStart(pid)
	return st != procDead
}

func splitSock(path string) (dir, base string) {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i], path[i+1:]
		}
	}
	return "", path
}

func readEntryFile(dirfd int, name string) ([]byte, uint32, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st.Uid, errors.New("not a regular file")
	}
	b, err := readLimited(fd, maxEntryFile)
	return b, st.Uid, err
}

// sweep removes leftovers of dead processes from the run directory:
// entry files, temporary files and rendezvous sockets, and from its
// record directory: record files and temporary files. Pids
// repeat across pid namespaces, so a socket is judged by itself (one
// that refuses connections has no server: probeSocket) and a temporary
// file by its age. Called once when the server starts; the node agent
// calls Sweep (sweep.go).
func (n *Node) sweep(dirfd int) {
	names, err := readDirNames(dirfd)
	if err != nil {
		return
	}
	for _, name := range names {
		if _, _, _, _, ok := parseEntryName(name); ok {
			if e, ok := n.checkEntry(dirfd, name); ok && !n.samePIDNS(e.owner) && n.removable(e.uid) &&
				probeSocket(e.socket) == socketDead {
				n.stats.staleEntries.Add(1)
				n.remove(dirfd, name)
			}
			continue
		}
		if _, ok := parseTempName(name); ok {
			if staleTemp(dirfd, name) {
				n.remove(dirfd, name)
			}
			continue
		}
		if pid, ok := parseSockName(name); ok && !youngAndAlive(dirfd, name, pid) &&
			probeSocket(filepath.Join(n.cfg.RunDir, name)) == socketDead {
			n.remove(dirfd, name)
		}
	}
	// The node agent's sweep (Sweep) makes a missing record directory: a
	// shared run directory its earlier build prepared has none.
	rfd, err := openRecordDir(dirfd, n.cfg.RunDir, n.sweeper)
	if err != nil {
		return
	}
	defer unix.Close(rfd)
	names, _ = readDirNames(rfd)
	for _, name := range names {
		_, rec := parseRecordName(name)
		_, _, pending := parsePendingRecordName(name)
		if rec || pending {
			n.checkRecord(rfd, name)
		} else if staleTemp(rfd, name) {
			n.remove(rfd, name)
		}
	}
}

// youngAndAlive reports whether the rendezvous socket name may be one its
// process (pid, alive) has bound and not started listening on yet: a
// probe refuses it then, as it refuses a dead one's, and two processes
// starting together (a server's fork workers) swept each other's socket
// between its bind and its listen (registration then failed with
// ENOENT). A socket older than staleTempAge is judged by the probe alone
// (its pid reused, or one in another pid namespace).
func youngAndAlive(dirfd int, name string, pid int) bool {
	return fileAge(dirfd, name) < staleTempAge && unix.Kill(pid, 0) != unix.ESRCH
}

func readDirNames(dirfd int) ([]string, error) {
	// Read through a duplicate so each listing starts at offset 0 and
	// leaves dirfd's own offset alone.
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 16<<10)
	for {
		nb, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if nb <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:nb], -1, names)
	}
}
