package fdhook

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRights: the descriptors of an SCM_RIGHTS message come back, open
// and the caller's; credentials beside them are an error that still
// returns them; no control data is none.
func TestRights(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	if err := unix.SetsockoptInt(pair[1], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		t.Fatal(err)
	}
	recv := func(oob []byte) ([]int, error) {
		t.Helper()
		if err := unix.Sendmsg(pair[0], []byte("x"), oob, nil, 0); err != nil {
			t.Fatal(err)
		}
		buf, ctl := make([]byte, 8), make([]byte, 256)
		_, n, _, _, err := unix.Recvmsg(pair[1], buf, ctl, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		return Rights(ctl[:n])
	}
	// With SO_PASSCRED on, every message carries credentials too.
	fds, err := recv(unix.UnixRights(pair[0], pair[1]))
	if len(fds) != 2 {
		t.Fatalf("got %d descriptors, want 2 (err %v)", len(fds), err)
	}
	if err == nil {
		t.Errorf("credentials beside the rights: no error")
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("descriptor %d not open: %v", fd, err)
		}
		unix.Close(fd)
	}
	unix.SetsockoptInt(pair[1], unix.SOL_SOCKET, unix.SO_PASSCRED, 0)
	fds, err = recv(unix.UnixRights(pair[0]))
	if len(fds) != 1 || err != nil {
		t.Errorf("rights alone: %v, %v", fds, err)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	if fds, err := Rights(nil); fds != nil || err != nil {
		t.Errorf("no control data: %v, %v", fds, err)
	}
}
