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
