package shim

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

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

// sockName returns the local address of socket fd.
func sockName(fd int) (netip.AddrPort, error) { return nameOf(fd, unix.SYS_GETSOCKNAME) }

// peerName returns the remote address of connected socket fd (zero when
// it has none).
func peerName(fd int) netip.AddrPort {
	ap, _ := nameOf(fd, unix.SYS_GETPEERNAME)
	return ap
}

// nameOf returns the address getsockname (trap SYS_GETSOCKNAME) or
// getpeername gives for an IP socket. It makes the system call itself:
// unix.Getsockname and Getpeername also ask every IP socket its protocol
// (SO_PROTOCOL, to tell L2TP's apart), one more system call per look, and
// a connection's setup looks several times.
func nameOf(fd int, trap uintptr) (netip.AddrPort, error) {
	var rsa unix.RawSockaddrAny
	l := uint32(unix.SizeofSockaddrAny)
	if _, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l))); e != 0 {
		return netip.AddrPort{}, e
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&rsa)), min(int(l), unix.SizeofSockaddrAny))
	ap, _, ok := ParseSockaddr(b)
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
