package shim

import (
	"testing"

	"golang.org/x/sys/unix"
)

// MSG_DONTWAIT on a connecting socket whose verdict is pending does not
// wait, as on a kernel socket with nothing to read or no room: -EAGAIN.
func TestDontWaitWhileVerdictPending(t *testing.T) {
	p, h := newProcess(t)
	lfd, cfd := listenConnect(t, p, h)
	defer closePair(p, h, lfd, cfd)
	buf := make([]byte, 64)
	var w Wait
	if r := p.Recv(cfd, buf, unix.MSG_DONTWAIT, &w); r != -int64(unix.EAGAIN) {
		t.Fatalf("recv(MSG_DONTWAIT) before the accept: %d (wait %+v), want -EAGAIN", r, w)
	}
	w = Wait{}
	if r := p.RecvMsg(cfd, [][]byte{buf}, unix.MSG_DONTWAIT|unix.MSG_PEEK, &w); r != -int64(unix.EAGAIN) {
		t.Fatalf("recvmsg(MSG_DONTWAIT|MSG_PEEK) before the accept: %d (wait %+v), want -EAGAIN", r, w)
	}
}
