package shim

import "testing"

func TestFDTable(t *testing.T) {
	var tab fdTable
	a, b := &Socket{}, &epollSet{}
	for _, fd := range []int{0, 1, fdChunkSize - 1, fdChunkSize, 1 << 20, 1<<31 - 1} {
		if tab.get(fd) != nil {
			t.Fatalf("fd %d: set before any set", fd)
		}
		tab.set(fd, &fdEntry{sock: a})
		if tab.socket(fd) != a || tab.epoll(fd) != nil {
			t.Fatalf("fd %d: socket not found", fd)
		}
		if e := tab.take(fd); e == nil || e.sock != a || tab.get(fd) != nil {
			t.Fatalf("fd %d: take", fd)
		}
	}
	tab.set(7, &fdEntry{ep: b})
	if tab.epoll(7) != b || tab.socket(7) != nil {
		t.Fatal("epoll entry")
	}
	for _, fd := range []int{-1, -1 << 20} {
		tab.set(fd, &fdEntry{sock: a})
		if tab.get(fd) != nil || tab.take(fd) != nil {
			t.Fatalf("negative fd %d stored", fd)
		}
	}
}
