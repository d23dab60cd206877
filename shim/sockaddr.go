package shim

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ParseSockaddr decodes a struct sockaddr_in or sockaddr_in6 as the C side
// passes it (raw bytes). ok is false for other families or short input.
func ParseSockaddr(b []byte) (ap netip.AddrPort, family int, ok bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, 0, false
	}
	family = int(binary.NativeEndian.Uint16(b))
	switch family {
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, family, false
		}
		port := binary.BigEndian.Uint16(b[2:])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), family, true
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, family, false
		}
		port := binary.BigEndian.Uint16(b[2:])
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), family, true
	}
	return netip.AddrPort{}, family, false
}

// addrPortOf converts a unix.Sockaddr of an IP family.
func addrPortOf(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)), true
	}
	return netip.AddrPort{}, false
}

// sockName returns the local address of socket fd.
func sockName(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap, ok := addrPortOf(sa)
	if !ok {
		return netip.AddrPort{}, unix.EAFNOSUPPORT
	}
	return ap, nil
}

// sockaddrFor returns the unix.Sockaddr of ap in the socket's family
// (IPv4 addresses in an AF_INET6 socket become v4-mapped).
func sockaddrFor(family int, ap netip.AddrPort) unix.Sockaddr {
	if family == unix.AF_INET6 {
		return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
}
