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
	pidns  string // readlink /proc/self/ns/pid
	socket string // the rendezvous server's path
}

// self is this node's process as an owner.
func (n *Node) self() owner {
	return owner{pid: n.pid, start: n.start, uid: n.euid, pidns: n.pidns, socket: n.srv.path}
}

// encode appends the owner's lines, in the order parseLine's callers
// expect them.
func (o owner) encode(b *bytes.Buffer) {
	fmt.Fprintf(b, "pid %d\nstart %d\nuid %d\npidns %s\nsocket %s\n", o.pid, o.start, o.uid, o.pidns, o.socket)
}

// ownerKeys are the keys of owner's lines, in file order.
var ownerKeys = []string{"pid", "start", "uid", "pidns", "socket"}

// parseLine takes one "key value" line if key is one of the owner's:
// known reports whether it was, err whether its value is bad (a pid of
// zero or beyond 31 bits, numbers that do not parse).
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
	case "socket":
		o.socket = val
	default:
		return false, nil
	}
	return true, err
}
