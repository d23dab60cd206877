package sockdiag

import (
	"errors"
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// pair makes a TCP connection on loopback: a listener on laddr, a client
// socket of family cfam connected to dst, and the accepted end. It
// returns the client's fd and the accepted end's local and remote
// addresses.
func pair(t *testing.T, lfam int, laddr unix.Sockaddr, cfam int, dst func(port int) unix.Sockaddr) (client int, local, remote netip.AddrPort) {
	t.Helper()
	ln, err := unix.Socket(lfam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, laddr); err != nil {
		t.Skipf("bind %v: %v", laddr, err)
	}
	if err := unix.Listen(ln, 8); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	port := 0
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		port = a.Port
	case *unix.SockaddrInet6:
		port = a.Port
	}
	client, err = unix.Socket(cfam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(client) })
	if err := unix.Connect(client, dst(port)); err != nil {
		t.Fatal(err)
	}
	acc, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(acc) })
	l, _ := unix.Getsockname(acc)
	r, _ := unix.Getpeername(acc)
	return client, addrPort(l), addrPort(r)
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}

var (
	v4Loop   = [4]byte{127, 0, 0, 1}
	v6Loop   = [16]byte{15: 1}
	v4Mapped = [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}
)

// TestPeer finds the connecting socket of connections accepted over IPv4,
// IPv6, and a dual-stack listener from an IPv4 socket and from an IPv6
// socket connected to a v4-mapped address: its inode is the one fstat
// gives the client's fd, its owner this process's uid.
func TestPeer(t *testing.T) {
	cases := []struct {
		name  string
		lfam  int
		laddr unix.Sockaddr
		cfam  int
		dst   func(int) unix.Sockaddr
	}{
		{"ipv4", unix.AF_INET, &unix.SockaddrInet4{Addr: v4Loop}, unix.AF_INET, func(p int) unix.Sockaddr { return &unix.SockaddrInet4{Addr: v4Loop, Port: p} }},
		{"ipv6", unix.AF_INET6, &unix.SockaddrInet6{Addr: v6Loop}, unix.AF_INET6, func(p int) unix.Sockaddr { return &unix.SockaddrInet6{Addr: v6Loop, Port: p} }},
		{"dual-stack listener, ipv4 client", unix.AF_INET6, &unix.SockaddrInet6{}, unix.AF_INET, func(p int) unix.Sockaddr { return &unix.SockaddrInet4{Addr: v4Loop, Port: p} }},
		{"dual-stack listener, v4-mapped client", unix.AF_INET6, &unix.SockaddrInet6{}, unix.AF_INET6, func(p int) unix.Sockaddr { return &unix.SockaddrInet6{Addr: v4Mapped, Port: p} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client, local, remote := pair(t, c.lfam, c.laddr, c.cfam, c.dst)
			want, err := Inode(client)
			if err != nil {
				t.Fatal(err)
			}
			ino, uid, err := Peer(local, remote)
			if err != nil {
				if errors.Is(err, ErrUnsupported) {
					t.Skipf("no inet_diag here: %v", err)
				}
				t.Fatalf("Peer(%v, %v): %v", local, remote, err)
			}
			if ino != want || uid != uint32(os.Getuid()) {
				t.Errorf("Peer(%v, %v) = inode %d uid %d, want %d %d", local, remote, ino, uid, want, os.Getuid())
			}
			// The accepting end itself is not the peer: asked the
			// other way round, the answer is the accepted socket.
			if back, _, err := Peer(remote, local); err != nil || back == want {
				t.Errorf("Peer(%v, %v) = %d, %v: want the accepted socket, not the client's %d", remote, local, back, err, want)
			}
		})
	}
}

// TestPeerGone: once the client's socket closed, its end is a TIME_WAIT
// of inode 0 or gone (ErrNotFound), never the inode it had; a pair of
// addresses no socket has, the caller's end included, is ErrUnsupported:
// the kernel's answer cannot tell it from missing diagnostics.
func TestPeerGone(t *testing.T) {
	client, local, remote := pair(t, unix.AF_INET, &unix.SockaddrInet4{Addr: v4Loop}, unix.AF_INET, func(p int) unix.Sockaddr { return &unix.SockaddrInet4{Addr: v4Loop, Port: p} })
	had, _ := Inode(client)
	unix.Close(client)
	ino, _, err := Peer(local, remote)
	switch {
	case errors.Is(err, ErrUnsupported):
		t.Skipf("no inet_diag here: %v", err)
	case err != nil && !errors.Is(err, ErrNotFound), err == nil && ino == had:
		t.Errorf("Peer after the client's close: inode %d, %v; it had %d", ino, err, had)
	}
	nowhere := netip.MustParseAddrPort("127.0.0.1:1")
	if _, _, err := Peer(nowhere, nowhere); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Peer of no socket at all: %v, want ErrUnsupported", err)
	}
}

// TestInodeNotSocket: a file that is not a socket has no socket identity.
func TestInodeNotSocket(t *testing.T) {
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ino, err := Inode(int(f.Fd())); err == nil {
		t.Errorf("Inode(/dev/null) = %d, want an error", ino)
	}
}

// TestParseReply: replies too short, of a wrong type or with a length
// past their bytes are errors, not reads out of bounds.
func TestParseReply(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		make([]byte, 15),
		{16, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},              // an error message without its errno
		{200, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},            // a length past the bytes
		{20, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // a reply shorter than inet_diag_msg
	} {
		if _, _, err := parseReply(b); err == nil {
			t.Errorf("parseReply(%x): no error", b)
		}
	}
}
