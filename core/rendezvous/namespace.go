package rendezvous

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Containers on one host share the run directory but not their
// namespaces. Every file in it says which pid and network namespace its
// writer runs in (owner.pidns, owner.netns), so that a reader knows what
// it can check: a pid only means something in its own pid namespace (every
// container has a pid 1), and an address only in its own network
// namespace. A namespace is named as readlink /proc/self/ns/KIND says,
// "net:[4026531840]"; the number is the namespace's inode, unique on the
// host while the namespace exists.

// namespaceOf names the caller's namespace of kind ("pid", "net"), or ""
// when it cannot be read.
func namespaceOf(kind string) string {
	buf := make([]byte, 64)
	n, err := unix.Readlink("/proc/self/ns/"+kind, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// namespaceID returns the inode number in a namespace name ("pid:[N]"),
// or 0 for "" and anything else.
func namespaceID(name string) uint64 {
	_, rest, ok := strings.Cut(name, ":[")
	num, ok2 := strings.CutSuffix(rest, "]")
	if !ok || !ok2 {
		return 0
	}
	id, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// validNamespace reports whether s is a namespace name of kind, or "".
func validNamespace(kind, s string) bool {
	return s == "" || (strings.HasPrefix(s, kind+":[") && namespaceID(s) != 0)
}

// sameNamespace reports whether two namespace names are the same
// namespace. An unknown one ("") counts as the same: a writer that could
// not read its namespace behaves as before namespaces were recorded.
func sameNamespace(a, b string) bool {
	return a == "" || b == "" || a == b
}

// maxEntryAddrs bounds the addresses an entry file lists.
const maxEntryAddrs = 64

// namespaceAddrs returns the addresses of the caller's network namespace
// that another namespace can reach: every interface address but loopback
// and link-local ones, at most maxEntryAddrs. A pod's address, for one.
func namespaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := pfx.Addr().Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || len(out) == maxEntryAddrs {
			continue
		}
		out = append(out, ip)
	}
	return out
}
