package rendezvous

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecvFrameSeen: recvFrame given a look that saw the whole frame
// takes it with its files, and only it (the byte after it stays queued:
// the one read is not a larger one); given a look that saw part of it,
// it waits for the rest; a length over the limit is refused.
func TestRecvFrameSeen(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	r, w := fds[0], fds[1]
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ev)
	deadline := time.Now().Add(5 * time.Second)
	send := func(body []byte, files ...int) {
		t.Helper()
		frame := make([]byte, 4+len(body))
		frame[0], frame[1] = byte(len(body)), byte(len(body)>>8)
		copy(frame[4:], body)
		if err := sendFrame(w, frame, files, deadline); err != nil {
			t.Fatal(err)
		}
	}
	want := bytes.Repeat([]byte("offer"), 17)

	// Whole, with a file, and a commit byte behind it.
	send(want, ev)
	if _, err := unix.Write(w, []byte{commitByte}); err != nil {
		t.Fatal(err)
	}
	var buf [peekLen]byte
	seen, ok, eof := peekFrame(r, &buf)
	if !ok || eof || len(seen) < 4+len(want) {
		t.Fatalf("peek: %d bytes, ok %v, eof %v; want at least %d", len(seen), ok, eof, 4+len(want))
	}
	body, files, err := recvFrame(r, seen, deadline)
	if err != nil || !bytes.Equal(body, want) || len(files) != 1 {
		t.Fatalf("seen whole: body %q, %d files, %v", body, len(files), err)
	}
	closeFiles(files)
	if b, ok, _ := recvByte(r); !ok || b != commitByte {
		t.Fatalf("the byte after the frame: %v %v, want the commit byte left queued", b, ok)
	}

	// Seen in part: the rest comes later and is waited for.
	frame := make([]byte, 4+len(want))
	frame[0] = byte(len(want))
	copy(frame[4:], want)
	if _, err := unix.Write(w, frame[:10]); err != nil {
		t.Fatal(err)
	}
	seen, _, _ = peekFrame(r, &buf)
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(w, frame[10:])
	}()
	if body, _, err := recvFrame(r, seen, deadline); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("seen in part: %q, %v", body, err)
	}

	// A length over the limit is refused before anything is allocated.
	big := []byte{0xff, 0xff, 0xff, 0x7f}
	if _, err := unix.Write(w, big); err != nil {
		t.Fatal(err)
	}
	seen, _, _ = peekFrame(r, &buf)
	if _, _, err := recvFrame(r, seen, deadline); err == nil {
		t.Fatal("a frame of 2 GiB was taken")
	}
}

// TestFDShareFollowsLimit: the share follows RLIMIT_NOFILE within
// fdShareFresh of a change.
func TestFDShareFollowsLimit(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < 1024 {
		t.Skipf("soft fd limit %d", rl.Cur)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	before := fdShare()
	lower := rl
	lower.Cur = 800
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lower); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fdShareFresh + 10*time.Millisecond)
	if got := fdShare(); got != 100 {
		t.Fatalf("share %d under a limit of 800 (%d before), want 100", got, before)
	}
}
