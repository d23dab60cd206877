package shim

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Early bytes on the direct path go into the offer's area (so they outlive
// the writer); when the acceptor never claims the connection (here: it
// accepts with the kernel alone, and its offer expires), they come back out
// of the area and reach the acceptor over kernel TCP, before what the
// program writes next, each byte once.
func TestEarlyDirectUnclaimed(t *testing.T) {
	p, h := newProcess(t)
	lfd := tcpSocket(t, p, h)
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if r := p.Listen(lfd, 8); r != 0 {
		t.Fatalf("listen: %d", r)
	}
	addr, _ := sockName(lfd)
	cfd := tcpSocket(t, p, h)
	defer unix.Close(cfd)
	if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 {
		t.Fatalf("connect: %d", r)
	}
	early := bytes.Repeat([]byte("early bytes, "), 400)
	if n := call(t, func(done int, w *Wait) int64 { return p.Send(cfd, early[done:], 0, w) }); n != int64(len(early)) {
		t.Fatalf("early send: %d", n)
	}
	s := p.lookup(cfd)
	s.mu.Lock()
	inArea := s.earlyArea
	s.mu.Unlock()
	if inArea != len(early) {
		t.Fatalf("%d early bytes in the area, want %d (they must not wait in this process's memory)", inArea, len(early))
	}
	afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC) // a plain accept: nobody claims the offer
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(afd)

	// The offer expires; the connector's next call finds the verdict and
	// falls back (Pass: the interposer makes the call on the kernel socket).
	more := []byte("and after")
	want := append([]byte(nil), early...)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := p.Send(cfd, more, unix.MSG_DONTWAIT, new(Wait))
		if r == Pass {
			break
		}
		if r != -int64(unix.EAGAIN) && r <= 0 {
			t.Fatalf("send while the verdict is pending: %d", r)
		}
		if r > 0 {
			want = append(want, more[:r]...) // early too
		}
		if time.Now().After(deadline) {
			t.Fatal("no verdict after 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.FDState(cfd) != FDUnmanaged {
		t.Fatalf("fallen-back socket is %d, want UNMANAGED", h.FDState(cfd))
	}
	if _, err := unix.Write(cfd, more); err != nil {
		t.Fatal(err)
	}
	want = append(want, more...)
	got := make([]byte, 0, len(want))
	buf := make([]byte, 64<<10)
	for len(got) < len(want) {
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(afd), Events: unix.POLLIN}}, 5000); n != 1 {
			t.Fatalf("the acceptor got %d of %d bytes, then nothing for 5 s", len(got), len(want))
		}
		n, err := unix.Read(afd, buf)
		if n <= 0 {
			t.Fatalf("read: %d %v after %d bytes", n, err, len(got))
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the acceptor read %d bytes, not the %d early bytes then the later ones", len(got), len(want))
	}
}
