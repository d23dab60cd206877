package rendezvous

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"
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
		if err := unix.Unlinkat(dirfd, entryName(addr.Port(), n.pid, n.start), 0); err != nil && err != unix.ENOENT {
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
	e := entryFile{owner: n.self(), port: port, group: n.groups[port]}
	for a := range addrs {
		e.listens = append(e.listens, a)
	}
	slices.SortFunc(e.listens, netip.AddrPort.Compare)
	return n.writeFile(entryName(port, n.pid, n.start), e.encode())
}

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
	rand.Read(b[:])
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
	entries, err := n.lookup(dst)
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
	exact := map[int]bool{}
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
				if listenMatches(l, dst, isLocal) {
					out = append(out, Entry{Listen: l, PID: e.pid, Start: e.start, UID: e.uid, Socket: e.socket, Group: e.group})
					exact[e.pid] = l.Addr() == dst.Addr()
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
		if exact[a.PID] != exact[b.PID] {
			if exact[a.PID] {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	return out, err
}

// checkEntry reads and checks the entry file name, removing it when it is
// garbage or its process is gone. ok means a live, checkable entry.
func (n *Node) checkEntry(dirfd int, name string) (e entryFile, ok bool) {
	b, owner, err := readEntryFile(dirfd, name)
	switch {
	case err == unix.ENOENT:
		return e, false // removed meanwhile
	case err == nil && owner != n.euid:
		return e, false // not ours to judge or remove (root wrote it)
	case err == nil:
		e, err = parseEntryFile(n.cfg.RunDir, name, b)
	}
	if err != nil {
		n.stats.garbageEntries.Add(1)
		unix.Unlinkat(dirfd, name, 0)
		return e, false
	}
	if e.pidns != n.pidns {
		return e, false // pids of another namespace cannot be checked
	}
	switch st, start := processStart(e.pid); {
	case st == procUnknown:
		return e, false
	case st == procDead || start != e.start:
		n.stats.staleEntries.Add(1)
		unix.Unlinkat(dirfd, name, 0)
		if _, base := splitSock(e.socket); base != "" && !n.pidLive(e.pid) {
			unix.Unlinkat(dirfd, base, 0)
		}
		return e, false
	}
	return e, true
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

// sweep removes leftovers of dead processes from the run directory: entry
// files, temporary files and rendezvous sockets named for pids that no
// longer run. Called once when the server starts.
func (n *Node) sweep(dirfd int) {
	names, err := readDirNames(dirfd)
	if err != nil {
		return
	}
	for _, name := range names {
		if _, _, _, ok := parseEntryName(name); ok {
			n.checkEntry(dirfd, name)
			continue
		}
		if _, ok := parseRecordName(name); ok {
			n.checkRecord(dirfd, name)
			continue
		}
		pid, ok := parseTempName(name)
		if !ok {
			pid, ok = parseSockName(name)
		}
		if ok && !n.pidLive(pid) {
			unix.Unlinkat(dirfd, name, 0)
		}
	}
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
