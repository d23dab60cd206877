package shim

import (
	"bytes"
	"fmt"
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
	lfd, cfd := listenConnect(t, p, h)
	defer unix.Close(lfd)
	defer unix.Close(cfd)
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

// Bytes written before the acceptor accepted are counted as sent by the
// connector and received by the acceptor, those that went into the area
// and those past its blocks (many small writes) alike.
func TestEarlyBytesCounted(t *testing.T) {
	p, h := newProcess(t)
	lfd, cfd := listenConnect(t, p, h)
	send := func(b []byte) {
		if n := call(t, func(done int, w *Wait) int64 { return p.Send(cfd, b[done:], 0, w) }); n != int64(len(b)) {
			t.Fatalf("early send: %d of %d", n, len(b))
		}
	}
	total := 0
	for range 16 {
		send(bytes.Repeat([]byte("k"), 1000))
		total += 1000
	}
	for range 100 { // more writes than the area has blocks
		send([]byte("0123456789"))
		total += 10
	}
	afd := acceptOne(t, p, h, lfd)
	t.Cleanup(func() {
		for _, fd := range []int{lfd, cfd, afd} {
			if h.FDState(fd) != FDUnmanaged {
				p.Close(fd)
			}
			unix.Close(fd)
		}
	})
	got := make([]byte, total)
	if n := call(t, func(done int, w *Wait) int64 { return p.Recv(afd, got[done:], unix.MSG_WAITALL, w) }); n != int64(total) {
		t.Fatalf("the acceptor read %d of %d", n, total)
	}
	for _, cs := range p.Stats().Snapshot().Connections {
		if cs.FD == cfd && cs.BytesSent != uint64(total) || cs.FD == afd && cs.BytesReceived != uint64(total) {
			t.Errorf("connection of fd %d counts %d sent, %d received; %d were written early", cs.FD, cs.BytesSent, cs.BytesReceived, total)
		}
	}
}

// shutdown(SHUT_WR) after early bytes: the acceptor reads every byte,
// then EOF. With a ring smaller than the early bytes some wait in the
// socket's buffer at the accept, and the FIN must not go ahead of them
// (found by the soak, bench/soak).
func TestEarlyBytesThenShutdown(t *testing.T) {
	for _, env := range [][]string{nil, {"SDPSHIM_BLOCKS=4", "SDPSHIM_BLOCK_SIZE=4K"}} {
		t.Run(fmtEnv(env), func(t *testing.T) { earlyBytesThenShutdown(t, env) })
	}
}

func earlyBytesThenShutdown(t *testing.T, env []string) {
	p, h := newProcess(t, env...)
	lfd, cfd := listenConnect(t, p, h)
	var want []byte
	send := func(b []byte) {
		if n := call(t, func(done int, w *Wait) int64 { return p.Send(cfd, b[done:], 0, w) }); n != int64(len(b)) {
			t.Fatalf("early send: %d of %d", n, len(b))
		}
		want = append(want, b...)
	}
	for i := range 16 {
		send(bytes.Repeat([]byte{byte('a' + i)}, 1000))
	}
	for i := range 100 {
		send([]byte(fmt.Sprintf("%09d,", i)))
	}
	if r := p.Shutdown(cfd, unix.SHUT_WR); r != 0 {
		t.Fatalf("shutdown: %d", r)
	}
	afd := acceptOne(t, p, h, lfd)
	// The connector takes the verdict (its push of the early bytes and
	// the FIN) before the acceptor reads: what did not fit in the ring
	// is still in its buffer then.
	for s, deadline := p.lookup(cfd), time.Now().Add(5*time.Second); s.getState() != sockAccelerated; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the connector is %v 5 s after the accept", s.getState())
		}
	}
	t.Cleanup(func() {
		for _, fd := range []int{lfd, cfd, afd} {
			if h.FDState(fd) != FDUnmanaged {
				p.Close(fd)
			}
			unix.Close(fd)
		}
	})
	got := make([]byte, len(want)+1)
	n := call(t, func(done int, w *Wait) int64 { return p.Recv(afd, got[done:], unix.MSG_WAITALL, w) })
	if n != int64(len(want)) || !bytes.Equal(got[:n], want) {
		t.Fatalf("the acceptor read %d bytes to EOF, want the %d written before the shutdown", n, len(want))
	}
	if r := call(t, func(done int, w *Wait) int64 { return p.Recv(afd, got, 0, w) }); r != 0 {
		t.Fatalf("after the bytes: %d, want EOF", r)
	}
}

// Early bytes past a small ring wait in the socket's buffer and are
// pushed by a goroutine started with the first of them; the program's own
// next call (here a read) may settle the socket and close the rendezvous
// connection before that goroutine ran. The bytes must still all arrive
// (a goroutine that polled the closed descriptor pushed nothing: the
// peer waited for the rest, the program for its answer).
func TestEarlyPushAfterSettle(t *testing.T) {
	p, h := newProcess(t, "SDPSHIM_BLOCKS=4", "SDPSHIM_BLOCK_SIZE=4K")
	lfd, cfd := listenConnect(t, p, h)
	defer unix.Close(lfd)
	addr, _ := sockName(lfd)
	early := bytes.Repeat([]byte("0123456789abcdef"), 2000) // 32000: twice the ring
	for i := range 200 {
		if i > 0 {
			cfd = tcpSocket(t, p, h)
			if r := p.Connect(cfd, rawSockaddr4(addr)); r != 0 {
				t.Fatalf("connect: %d", r)
			}
		}
		for done := 0; done < len(early); {
			n := p.Send(cfd, early[done:], unix.MSG_DONTWAIT, new(Wait))
			if n <= 0 {
				t.Fatalf("connection %d: early send at %d: %d", i, done, n)
			}
			done += int(n)
		}
		afd := acceptOne(t, p, h, lfd)
		p.Recv(cfd, make([]byte, 1), unix.MSG_DONTWAIT, new(Wait)) // settles: the verdict is in
		got := make([]byte, len(early))
		n := call(t, func(done int, w *Wait) int64 { return p.Recv(afd, got[done:], unix.MSG_WAITALL, w) })
		if n != int64(len(early)) || !bytes.Equal(got, early) {
			t.Fatalf("connection %d: the acceptor read %d of %d early bytes", i, n, len(early))
		}
		for _, fd := range []int{cfd, afd} {
			p.Close(fd)
			unix.Close(fd)
		}
	}
}
