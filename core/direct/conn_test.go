package direct

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair opens both sides of a fresh area, the second through the memfd as
// a peer process would.
func pair(t *testing.T, blocks, size int) (*Conn, *Conn) {
	t.Helper()
	a, err := NewArea(blocks, size, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MapArea(a.FD())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Open(a, 0, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Open(b, 1, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Free(); cb.Free() })
	return ca, cb
}

func TestSendRecv(t *testing.T) {
	a, b := pair(t, 4, 256)
	msg := bytes.Repeat([]byte("0123456789"), 100)
	n, sl, err := a.Send(msg, true)
	if n != 4*(256-HeaderSize) || sl != nil || err != nil {
		t.Fatalf("send: %d %v %v", n, sl, err)
	}
	if _, _, err := a.Send(msg[n:], false); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("full send: %v", err)
	}
	got := make([]byte, 1000)
	m, _, err := b.Recv(got, true, false)
	if m != n || err != nil || !bytes.Equal(got[:m], msg[:n]) {
		t.Fatalf("peek: %d %v", m, err)
	}
	if b.Inq() != n || a.Outq() != n {
		t.Fatalf("inq %d outq %d", b.Inq(), a.Outq())
	}
	m, _, err = b.Recv(got, false, false)
	if m != n || err != nil || !bytes.Equal(got[:m], msg[:n]) {
		t.Fatalf("recv: %d %v", m, err)
	}
	if _, sl, err := b.Recv(got, false, true); sl == nil || err != nil {
		t.Fatalf("empty blocking recv: %v %v", sl, err)
	} else {
		b.Woke(sl)
	}
	a.Fin()
	if m, _, err := b.Recv(got, false, true); m != 0 || err != nil {
		t.Fatalf("eof: %d %v", m, err)
	}
	if _, _, err := a.Send(msg, true); err != unix.EPIPE {
		t.Fatalf("send after fin: %v", err)
	}
	a.Reset()
	if _, _, err := b.Send(msg, true); err != unix.ECONNRESET {
		t.Fatalf("send after reset: %v", err)
	}
}

// TestSleepWake: a blocked receiver's Sleep is ended by the peer's send.
func TestSleepWake(t *testing.T) {
	a, b := pair(t, 8, 1024)
	b.SetPolling(0, 0)
	buf := make([]byte, 64)
	_, sl, err := b.Recv(buf, false, true)
	if sl == nil || err != nil {
		t.Fatalf("recv: %v %v", sl, err)
	}
	done := make(chan struct{})
	go func() {
		ts := unix.Timespec{Sec: 5}
		unix.Syscall6(unix.SYS_FUTEX, uintptrOf(sl.Word), 0 /* FUTEX_WAIT */, uintptr(sl.Val), uintptrOfTS(&ts), 0, 0)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	if _, _, err := a.Send([]byte("x"), true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the sleeper was not woken")
	}
	b.Woke(sl)
	if n, _, _ := b.Recv(buf, false, false); n != 1 {
		t.Fatalf("recv after wake: %d", n)
	}
}

func TestMapAreaRejects(t *testing.T) {
	fd, _ := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
	defer unix.Close(fd)
	unix.Ftruncate(fd, 1<<16)
	if _, err := MapArea(fd); err == nil {
		t.Fatal("an unsealed memfd was mapped")
	}
	if _, err := NewArea(3, 256, 1); !errors.Is(err, ErrGeometry) {
		t.Fatalf("3 blocks: %v", err)
	}
}

// BenchmarkSendRecv moves 64-byte messages through one area, sender and
// receiver on one goroutine: the cost of the calls themselves, with no
// wait. It must not allocate.
func BenchmarkSendRecv(b *testing.B) {
	a, err := NewArea(64, 16384, 1)
	if err != nil {
		b.Fatal(err)
	}
	peer, err := MapArea(a.FD())
	if err != nil {
		b.Fatal(err)
	}
	ca, _ := Open(a, 0, -1, -1)
	cb, _ := Open(peer, 1, -1, -1)
	defer ca.Free()
	defer cb.Free()
	msg, got := make([]byte, 64), make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, _, err := ca.Send(msg, false); n != 64 || err != nil {
			b.Fatalf("send %d %v", n, err)
		}
		if n, _, err := cb.Recv(got, false, false); n != 64 || err != nil {
			b.Fatalf("recv %d %v", n, err)
		}
	}
}
