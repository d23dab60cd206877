package shim

import (
	"testing"

	"golang.org/x/sys/unix"
)

// inKernelSet finds an epoll fd listed by another kernel epoll set
// (/proc fdinfo "tfd:" lines), and only that one.
func TestInKernelSet(t *testing.T) {
	outer, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(outer)
	inner, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(inner)
	if inKernelSet(inner) {
		t.Fatal("inner listed before it was added")
	}
	if err := unix.EpollCtl(outer, unix.EPOLL_CTL_ADD, inner, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		t.Fatal(err)
	}
	if !inKernelSet(inner) {
		t.Fatal("inner added to outer: not found")
	}
	if inKernelSet(outer) {
		t.Fatal("outer is in no set: found")
	}
}
