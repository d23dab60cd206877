package rendezvous

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Entry is a live listener process that Lookup found for a destination.
type Entry struct {
	// Listen is the registered listen address that matched (possibly a
	// wildcard).
	Listen netip.AddrPort
	// PID and Start identify the process (Start: field 22 of
	// /proc/PID/stat, so a reused pid is told apart).
	PID   int
	Start uint64
	// UID is the uid the entry was written by.
	UID uint32
	// Socket is the path of the process's rendezvous socket.
	Socket string
	// Group: the listener is shared with other processes (fork children
	// accept on it), so no process can answer for its connections in
	// advance: a connector defers (deferred.go) instead of offering.
	Group bool
	// OtherNetns: the listener runs in another network namespace of this
	// host (another pod), reached at one of its addresses. The connector
	// must then bind a specific source address, so that the 4-tuple it
	// offers is the one the listener's accept() sees (ports repeat across
	// namespaces). PID is then a pid of the listener's pid namespace,
	// which may not be the connector's.
	OtherNetns bool

	name  string // the entry file's name
	owned bool   // written by this uid
}

// An entry file lives in the run directory under the name
// l<port>-<pid>-<start>-<pidns> (one per listening port and process; the
// last field the pid namespace's inode, since pids repeat across
// containers), is replaced
// atomically (written as .t<pid>-<random>, then renamed) and holds:
//
//	sdpshim-rendezvous 1
//	pid 1234
//	start 5678
//	uid 1000
//	pidns pid:[4026531836]
//	netns net:[4026531840]
//	socket /run/user/1000/sdpshim/p1234-0a1b2c3d.sock
//	listen 0.0.0.0:8080
//	listen [::1]:8080
//	addr 10.244.1.7
//	mode group
//
// The addr lines (none or more) are the addresses of the listener's
// network namespace that other namespaces reach it at (a pod's address);
// a connector in another network namespace matches its destination
// against them. The mode line is present only for a group listener
// (Entry.Group). Any
// deviation (unknown line, missing key, a name that disagrees with the
// content, a socket outside the run directory) makes the file garbage.
type entryFile struct {
	owner
	port    uint16
	listens []netip.AddrPort
	addrs   []netip.Addr
	group   bool
}

const (
	entryHeader     = "sdpshim-rendezvous 1"
	maxEntryFile    = 8 << 10
	maxEntryListens = 64
)

func entryName(port uint16, pid int, start, pidns uint64) string {
	return fmt.Sprintf("l%d-%d-%d-%d", port, pid, start, pidns)
}

// parseEntryName splits l<port>-<pid>-<start>-<pidns>.
func parseEntryName(name string) (port uint16, pid int, start, pidns uint64, ok bool) {
	rest, found := strings.CutPrefix(name, "l")
	if !found {
		return 0, 0, 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 {
		return 0, 0, 0, 0, false
	}
	p, err1 := strconv.ParseUint(f[0], 10, 16)
	id, err2 := strconv.ParseUint(f[1], 10, 31)
	st, err3 := strconv.ParseUint(f[2], 10, 64)
	ns, err4 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || p == 0 || id == 0 {
		return 0, 0, 0, 0, false
	}
	return uint16(p), int(id), st, ns, true
}

// sockName is the rendezvous socket's name: p<pid>-<8 hex digits>.sock.
func sockName(pid int, random uint32) string {
	return fmt.Sprintf("p%d-%08x.sock", pid, random)
}

// isSockOf reports whether path is a rendezvous socket in rundir named for
// pid (sockName): what an entry file, a record file or a PULL may name.
func isSockOf(rundir, path string, pid int) bool {
	dir, base := filepath.Split(path)
	sp, ok := parseSockName(base)
	return ok && sp == pid && filepath.Clean(dir) == rundir
}

// parseSockName returns the pid a socket name was made for.
func parseSockName(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, "p")
	rest, found2 := strings.CutSuffix(rest, ".sock")
	if !found || !found2 {
		return 0, false
	}
	p, hex, found := strings.Cut(rest, "-")
	if !found || len(hex) != 8 {
		return 0, false
	}
	if _, err := strconv.ParseUint(hex, 16, 32); err != nil {
		return 0, false
	}
	id, err := strconv.ParseUint(p, 10, 31)
	if err != nil || id == 0 {
		return 0, false
	}
	return int(id), true
}

// tempName is a file being written: .t<pid>-<random>.
func tempName(pid int, random uint32) string {
	return fmt.Sprintf(".t%d-%08x", pid, random)
}

func parseTempName(name string) (pid int, ok bool) {
	rest, found := strings.CutPrefix(name, ".t")
	if !found {
		return 0, false
	}
	p, hex, found := strings.Cut(rest, "-")
	if !found || len(hex) != 8 {
		return 0, false
	}
	id, err := strconv.ParseUint(p, 10, 31)
	if err != nil || id == 0 {
		return 0, false
	}
	return int(id), true
}

func (e *entryFile) encode() []byte {
	var b bytes.Buffer
	b.WriteString(entryHeader + "\n")
	e.owner.encode(&b)
	for _, l := range e.listens {
		fmt.Fprintf(&b, "listen %s\n", l)
	}
	for _, a := range e.addrs {
		fmt.Fprintf(&b, "addr %s\n", a)
	}
	if e.group {
		b.WriteString("mode group\n")
	}
	return b.Bytes()
}

// parseEntryFile parses the file called name in rundir.
func parseEntryFile(rundir, name string, b []byte) (entryFile, error) {
	port, pid, start, pidns, ok := parseEntryName(name)
	if !ok {
		return entryFile{}, fmt.Errorf("entry name %q", name)
	}
	e := entryFile{port: port}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || lines[0] != entryHeader || lines[len(lines)-1] != "" {
		return entryFile{}, fmt.Errorf("entry %s: bad header or ending", name)
	}
	seen := map[string]bool{}
	for _, line := range lines[1 : len(lines)-1] {
		key, val, found := strings.Cut(line, " ")
		if !found || (key != "listen" && key != "addr" && seen[key]) {
			return entryFile{}, fmt.Errorf("entry %s: line %q", name, line)
		}
		seen[key] = true
		known, err := e.parseLine(key, val)
		switch {
		case known:
		case key == "listen":
			var ap netip.AddrPort
			ap, err = netip.ParseAddrPort(val)
			if err == nil && (ap.Port() != port || len(e.listens) == maxEntryListens) {
				err = fmt.Errorf("listen %s on port %d", ap, port)
			}
			e.listens = append(e.listens, ap)
		case key == "addr":
			var a netip.Addr
			a, err = netip.ParseAddr(val)
			if err == nil && (a.Zone() != "" || a.Is4In6() || len(e.addrs) == maxEntryAddrs) {
				err = fmt.Errorf("addr %s", a)
			}
			e.addrs = append(e.addrs, a)
		case key == "mode":
			if val != "group" {
				err = fmt.Errorf("mode %q", val)
			}
			e.group = true
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return entryFile{}, fmt.Errorf("entry %s: %w", name, err)
		}
	}
	switch {
	case !seen["pid"] || !seen["start"] || !seen["uid"] || !seen["socket"] || len(e.listens) == 0:
		return entryFile{}, fmt.Errorf("entry %s: missing keys", name)
	case e.pid != pid || e.start != start || namespaceID(e.pidns) != pidns:
		return entryFile{}, fmt.Errorf("entry %s: content names pid %d start %d pidns %q", name, e.pid, e.start, e.pidns)
	}
	if !isSockOf(rundir, e.socket, pid) {
		return entryFile{}, fmt.Errorf("entry %s: socket %q", name, e.socket)
	}
	return e, nil
}
