package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Errors of Peer.
var (
	// ErrNotFound: the connection's other end is not a socket of this
	// network namespace (the peer is in another one, or its socket
	// closed).
	ErrNotFound = errors.New("sockdiag: no such socket")
	// ErrUnsupported: the kernel's diagnostics do not find TCP sockets
	// here (no inet_diag): not even the caller's own end.
	ErrUnsupported = errors.New("sockdiag: TCP socket diagnostics unavailable")
)

// Inode returns the inode number of the socket fd: its identity while it
// lives, as the kernel's diagnostics report it (a socket's inode is a
// 32-bit number). 0 is never a socket's.
func Inode(fd int) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("sockdiag: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Ino == 0 || st.Ino > 1<<32-1 {
		return 0, fmt.Errorf("sockdiag: fd %d: not a socket (mode %#o, inode %d)", fd, st.Mode, st.Ino)
	}
	return uint32(st.Ino), nil
}

// Peer returns the inode and owner uid of the TCP socket whose own
// address is remote and whose peer's is local: the connecting end of a
// connection this process holds as (local, remote), an accepted one,
// when both ends are in this network namespace. IPv4 and v4-mapped
// addresses find IPv4 sockets and dual-stack ones alike. A socket that
// closed and left a TIME_WAIT has inode 0. Errors: ErrNotFound;
// ErrUnsupported; or the kernel could not be asked (no spare
// descriptor).
func Peer(local, remote netip.AddrPort) (ino, uid uint32, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, 0, fmt.Errorf("sockdiag: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	ino, uid, err = query(fd, remote, local)
	if err == ErrNotFound {
		// The kernel says ENOENT for a family it has no diagnostics of
		// too: the caller's own end tells which it is.
		if _, _, err2 := query(fd, local, remote); err2 == ErrNotFound {
			err = ErrUnsupported
		}
	}
	return ino, uid, err
}

// query asks the netlink socket fd for the TCP socket with own address
// src and peer dst.
func query(fd int, src, dst netip.AddrPort) (ino, uid uint32, err error) {
	if err := unix.Sendto(fd, request(src, dst), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, 0, fmt.Errorf("sockdiag: send: %w", err)
	}
	// The kernel answers within the send: the reply is queued now.
	var buf [512]byte
	for {
		n, _, err := unix.Recvfrom(fd, buf[:], unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sockdiag: receive: %w", err)
		}
		return parseReply(buf[:n])
	}
}

// Sizes and offsets of the kernel's structures (linux/netlink.h,
// linux/inet_diag.h), in host order but for the socket ID's ports and
// addresses, which are in network order.
const (
	nlmsgHdrLen  = 16 // struct nlmsghdr
	reqLen       = 56 // struct inet_diag_req_v2
	msgLen       = 72 // struct inet_diag_msg
	msgUIDOffset = 64
	msgInoOffset = 68
	noCookie     = 0xffffffff // INET_DIAG_NOCOOKIE
	allStates    = 0xffffffff
)

// request is the netlink message that asks for the one TCP socket with
// own address src and peer dst.
func request(src, dst netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+reqLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST)
	r := b[nlmsgHdrLen:]
	v4 := src.Addr().Unmap().Is4() && dst.Addr().Unmap().Is4()
	r[0] = unix.AF_INET6
	if v4 {
		r[0] = unix.AF_INET
	}
	r[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], allStates)
	id := r[8:] // struct inet_diag_sockid
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src.Addr(), v4)
	putAddr(id[20:36], dst.Addr(), v4)
	binary.NativeEndian.PutUint32(id[40:], noCookie)
	binary.NativeEndian.PutUint32(id[44:], noCookie)
	return b
}

func putAddr(b []byte, a netip.Addr, v4 bool) {
	if v4 {
		a4 := a.Unmap().As4()
		copy(b, a4[:])
		return
	}
	a16 := a.As16()
	copy(b, a16[:])
}

// parseReply reads the kernel's answer to request: one inet_diag_msg, or
// an error message (ENOENT: no such socket).
func parseReply(b []byte) (ino, uid uint32, err error) {
	if len(b) < nlmsgHdrLen {
		return 0, 0, fmt.Errorf("sockdiag: short reply (%d bytes)", len(b))
	}
	n := binary.NativeEndian.Uint32(b[0:])
	typ := binary.NativeEndian.Uint16(b[4:])
	if n < nlmsgHdrLen || int(n) > len(b) {
		return 0, 0, fmt.Errorf("sockdiag: reply length %d of %d bytes", n, len(b))
	}
	body := b[nlmsgHdrLen:n]
	switch {
	case typ == unix.NLMSG_ERROR && len(body) >= 4:
		errno := unix.Errno(-int32(binary.NativeEndian.Uint32(body)))
		if errno == unix.ENOENT {
			return 0, 0, ErrNotFound
		}
		return 0, 0, fmt.Errorf("sockdiag: %w", errno)
	case typ != unix.SOCK_DIAG_BY_FAMILY || len(body) < msgLen:
		return 0, 0, fmt.Errorf("sockdiag: reply type %d, %d bytes", typ, len(body))
	}
	return binary.NativeEndian.Uint32(body[msgInoOffset:]), binary.NativeEndian.Uint32(body[msgUIDOffset:]), nil
}
