package shim

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Connection setup with a one-byte round trip, accept and first use in
// this process: to a plain registered listener (the offer answered by
// the listener) and to a group listener (deferred: record, PULL, offer).
func BenchmarkConnectDirect(b *testing.B)   { benchConnect(b, false) }
func BenchmarkConnectDeferred(b *testing.B) { benchConnect(b, true) }

func benchConnect(b *testing.B, group bool) {
	p, h, err := newGroupProcess(b.TempDir() + "/run")
	if err != nil {
		b.Fatal(err)
	}
	defer p.Exit()
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	h.SetFDState(lfd, p.SocketCreated(lfd, unix.AF_INET, unix.SOCK_STREAM))
	unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if r := p.Listen(lfd, 64); r != 0 {
		b.Fatalf("listen: %d", r)
	}
	if group {
		p.ForkPrepare(ForkFork)
	}
	addr, _ := sockName(lfd)
	raw := rawSockaddr4(addr)
	one := []byte{'x'}
	buf := make([]byte, 1)
	b.ResetTimer()
	for range b.N {
		cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		h.SetFDState(cfd, p.SocketCreated(cfd, unix.AF_INET, unix.SOCK_STREAM))
		if r := p.Connect(cfd, raw); r != 0 && r != Pass {
			b.Fatalf("connect: %d", r)
		}
		if err := hookWrite(p, h, cfd, one); err != nil {
			b.Fatal(err)
		}
		afd, sa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		peer, _ := addrPortOf(sa)
		h.SetFDState(afd, p.Accept(lfd, afd, peer, 0))
		if err := echo(p, h, afd, 1); err != nil {
			b.Fatal(err)
		}
		if n, err := hookRead(p, h, cfd, buf); n != 1 || err != nil {
			b.Fatalf("read %d, %v", n, err)
		}
		if h.FDState(cfd) != FDManaged || h.FDState(afd) != FDManaged {
			b.Fatal("not accelerated")
		}
		closeHooked(p, h, afd)
		closeHooked(p, h, cfd)
	}
	b.StopTimer()
	closeHooked(p, h, lfd)
}
