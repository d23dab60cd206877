package rendezvous

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// isLocalAddr reports whether a TCP connect to a would stay on this host:
// loopback and unspecified addresses always do; any other address does
// when the kernel's route to it is a local one, which shows as the route's
// source address being a itself (asked with a connected UDP socket, which
// sends nothing). An error counts as not local.
func isLocalAddr(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return false
	case a.IsLoopback() || a.IsUnspecified():
		return true
	case a.Zone() != "":
		return false // link-local with a zone: not supported
	}
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: 9, Addr: a.As16()})
	if a.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: 9, Addr: a.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return false
	}
	local, err := unix.Getsockname(fd)
	if err != nil {
		return false
	}
	switch s := local.(type) {
	case *unix.SockaddrInet4:
		return a.Is4() && netip.AddrFrom4(s.Addr) == a
	case *unix.SockaddrInet6:
		return a.Is6() && netip.AddrFrom16(s.Addr) == a
	}
	return false
}

// listenMatches reports whether a listener registered on l accepts a
// connection to dst (canonical: unmapped): the same address, or a
// wildcard of a matching family when dst is a local address. A v6
// wildcard (::) also matches IPv4, as a dual-stack socket does. local is
// asked at most once, lazily.
func listenMatches(l, dst netip.AddrPort, local func() bool) bool {
	if l.Port() != dst.Port() {
		return false
	}
	la, da := l.Addr().Unmap(), dst.Addr()
	switch {
	case la == da:
		return true
	case !la.IsUnspecified():
		return false
	case la.Is4() && !da.Is4():
		return false
	}
	return local()
}
