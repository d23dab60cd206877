package shim

import (
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestParseSockaddr(t *testing.T) {
	v4 := unix.RawSockaddrInet4{Family: unix.AF_INET, Port: 0x3412, Addr: [4]byte{127, 0, 0, 1}} // port 0x1234, network order
	b4 := unsafe.Slice((*byte)(unsafe.Pointer(&v4)), unix.SizeofSockaddrInet4)
	ap, fam, ok := ParseSockaddr(b4)
	if !ok || fam != unix.AF_INET || ap != netip.MustParseAddrPort("127.0.0.1:4660") {
		t.Errorf("v4: %v %d %v", ap, fam, ok)
	}
	v6 := unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: 0x5000, Addr: netip.MustParseAddr("::ffff:10.1.2.3").As16()}
	b6 := unsafe.Slice((*byte)(unsafe.Pointer(&v6)), unix.SizeofSockaddrInet6)
	ap, fam, ok = ParseSockaddr(b6)
	if !ok || fam != unix.AF_INET6 || ap.Port() != 80 || ap.Addr().Unmap() != netip.MustParseAddr("10.1.2.3") {
		t.Errorf("v6: %v %d %v", ap, fam, ok)
	}
	if _, _, ok := ParseSockaddr(b4[:8]); ok {
		t.Error("short sockaddr accepted")
	}
	unspec := []byte{0, 0, 0, 0}
	if _, _, ok := ParseSockaddr(unspec); ok {
		t.Error("AF_UNSPEC accepted")
	}
}

// addrPortOf converts a unix.Sockaddr of an IP family (what Accept4
// returns in the tests).
func addrPortOf(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)), true
	}
	return netip.AddrPort{}, false
}

// TestNameOf: sockName and peerName (raw getsockname and getpeername)
// give what the kernel gives, for both IP families; a socket of another
// family is refused, and an unconnected one has no peer.
func TestNameOf(t *testing.T) {
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		l, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(l)
		bindTo := sockaddrFor(fam, netip.MustParseAddrPort("127.0.0.1:0"))
		if fam == unix.AF_INET6 {
			bindTo = &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}
		}
		if err := unix.Bind(l, bindTo); err != nil {
			if fam == unix.AF_INET6 {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		if err := unix.Listen(l, 1); err != nil {
			t.Fatal(err)
		}
		addr, err := sockName(l)
		if err != nil || addr.Port() == 0 {
			t.Fatalf("listener: %v %v", addr, err)
		}
		if p := peerName(l); p.IsValid() {
			t.Fatalf("listener has a peer: %v", p)
		}
		c, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(c)
		if err := unix.Connect(c, sockaddrFor(fam, addr)); err != nil {
			t.Fatal(err)
		}
		local, err := sockName(c)
		sa, err2 := unix.Getsockname(c)
		want, _ := addrPortOf(sa)
		if err != nil || err2 != nil || local != want || local.Port() == 0 {
			t.Fatalf("client's name %v %v, kernel %v %v", local, err, want, err2)
		}
		if p := peerName(c); p != addr {
			t.Fatalf("client's peer %v, want %v", p, addr)
		}
	}
	u, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(u)
	if _, err := sockName(u); err != unix.EAFNOSUPPORT {
		t.Fatalf("unix socket: %v", err)
	}
	if _, err := nameOf(-1, unix.SYS_GETSOCKNAME); err != unix.EBADF {
		t.Fatalf("bad fd: %v", err)
	}
}
