package rendezvous

import (
	"bytes"
	"fmt"
	"strconv"
)

// owner is the process a run-directory file speaks for (entry files,
// record files): who it is, whose it is, and the rendezvous server to
// reach it at. Both kinds of file write and parse these lines here.
type owner struct {
	pid    int    // in the writer's pid namespace
	start  uint64 // /proc/PID/stat field 22: tells a reused pid apart
	uid    uint32
	pidns  string // readlink /proc/self/ns/pid (namespace.go)
	netns  string // readlink /proc/self/ns/net
	socket string // the rendezvous server's path
}

// self is this node's process as an owner.
func (n *Node) self() owner {
	return owner{pid: n.pid, start: n.start, uid: n.euid, pidns: n.pidns, netns: n.netns, socket: n.srv.path}
}

// encode appends the owner's lines, in the order parseLine's callers
// expect them.
func (o owner) encode(b *bytes.Buffer) {
	fmt.Fprintf(b, "pid %d\nstart %d\nuid %d\npidns %s\nnetns %s\nsocket %s\n", o.pid, o.start, o.uid, o.pidns, o.netns, o.socket)
}

// ownerKeys are the keys of owner's lines, in file order.
var ownerKeys = []string{"pid", "start", "uid", "pidns", "netns", "socket"}

// parseLine takes one "key value" line if key is one of the owner's:
// known reports whether it was, err whether its value is bad (a pid of
// zero or beyond 31 bits, numbers that do not parse, a namespace name of
// the wrong kind).
func (o *owner) parseLine(key, val string) (known bool, err error) {
	switch key {
	case "pid":
		var p uint64
		p, err = strconv.ParseUint(val, 10, 31)
		if err == nil && p == 0 {
			err = fmt.Errorf("pid 0")
		}
		o.pid = int(p)
	case "start":
		o.start, err = strconv.ParseUint(val, 10, 64)
	case "uid":
		var u uint64
		u, err = strconv.ParseUint(val, 10, 32)
		o.uid = uint32(u)
	case "pidns":
		o.pidns = val
		if !validNamespace("pid", val) {
			err = fmt.Errorf("pidns %q", val)
		}
	case "netns":
		o.netns = val
		if !validNamespace("net", val) {
			err = fmt.Errorf("netns %q", val)
		}
	case "socket":
		o.socket = val
	default:
		return false, nil
	}
	return true, err
}

// samePIDNS reports whether o's pid can be checked here: it was written
// in this node's pid namespace.
func (n *Node) samePIDNS(o owner) bool { return sameNamespace(o.pidns, n.pidns) }

// samePIDNSID is samePIDNS for a pid namespace named by its inode (0:
// unknown, counted as the same).
func (n *Node) samePIDNSID(id uint64) bool { return id == 0 || n.nsID == 0 || id == n.nsID }
