package shim

import (
	"testing"

	"golang.org/x/sys/unix"
)

func isOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// closedFDs names the lowest numbers that are not open, in order, with a
// hole made below the first ones the process had free.
func TestClosedFDsLowestFirst(t *testing.T) {
	var held []int
	t.Cleanup(func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	})
	for range 6 {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, fd)
	}
	unix.Close(held[2]) // a hole: now the lowest free number but one, or lower
	hole := held[2]
	held = append(held[:2], held[3:]...)

	got := closedFDs(4)
	if len(got) != 4 {
		t.Fatalf("closedFDs(4) = %v", got)
	}
	for i, fd := range got {
		if isOpen(fd) {
			t.Errorf("closedFDs gave %d, which is open", fd)
		}
		if i > 0 && fd <= got[i-1] {
			t.Errorf("closedFDs = %v: not ascending", got)
		}
	}
	for fd := 0; fd < got[0]; fd++ {
		if !isOpen(fd) {
			t.Errorf("%d is free and below closedFDs's first, %d", fd, got[0])
		}
	}
	if got[0] > hole {
		t.Errorf("closedFDs = %v misses the hole at %d", got, hole)
	}
}

// A soft RLIMIT_NOFILE below the poll window: poll(2) refuses more fds
// than the limit, so the window shrinks to it.
func TestClosedFDsUnderLowLimit(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	hi := 0
	for fd := 0; fd < 1024; fd++ {
		if isOpen(fd) {
			hi = fd
		}
	}
	low := uint64(hi + 4) // hi+1..hi+3 are free whatever lies below
	if low >= old.Cur || low >= 256 {
		t.Skipf("open fds up to %d leave no room for a limit below the window", hi)
	}
	lowered := old
	lowered.Cur = low
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	got := closedFDs(3)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	if len(got) != 3 {
		t.Fatalf("closedFDs(3) under RLIMIT_NOFILE %d = %v", low, got)
	}
	for _, fd := range got {
		if fd >= int(low) || isOpen(fd) {
			t.Errorf("closedFDs gave %d (limit %d)", fd, low)
		}
	}
}

// openOf keeps the open numbers; isRuntimeKind knows the poller's two
// kinds and nothing else.
func TestOpenOfAndRuntimeKinds(t *testing.T) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(epfd)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	free := closedFDs(1)[0]

	got := openOf([]int{efd, free, epfd, p[0]})
	if len(got) != 3 || got[0] != efd || got[1] != epfd || got[2] != p[0] {
		t.Errorf("openOf = %v, want [%d %d %d]", got, efd, epfd, p[0])
	}
	for fd, want := range map[int]bool{efd: true, epfd: true, p[0]: false, free: false} {
		if isRuntimeKind(fd) != want {
			t.Errorf("isRuntimeKind(%d) = %v, want %v", fd, !want, want)
		}
	}
}
