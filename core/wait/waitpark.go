package wait

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// ParkFD lets goroutines of the core wait for a pollable descriptor it
// holds (an epoll set, an eventfd) parked in the Go runtime's poller
// rather than blocked in a system call. A goroutine blocked in a system
// call keeps its P until sysmon takes it (after 20 us) and hands it to
// another thread; with sleeps every few microseconds under traffic
// (the progress and NIC goroutines of every channel), those hand-offs
// cost context switches and keep sysmon itself waking every 20 us. A
// parked goroutine costs neither, and an idle process's threads all sleep.
type ParkFD struct {
	fd     int
	f      *os.File
	rc     syscall.RawConn
	parked bool // the poller watches fd; else Wait blocks in poll(2)
	ready  func(fd int) bool
	readFn func(fd uintptr) bool // ready for rc.Read, made once: a wait allocates nothing
}

// NewParkFD takes over fd (which the core reported with NoteFDs), a
// descriptor that polls readable when there is something to do, and sets
// O_NONBLOCK on it; Close releases it (FDHook included). Should the
// poller refuse fd, Wait blocks in poll(2) instead. ready(fd) reports
// whether a Wait may return; it must not block (a zero-timeout
// epoll_wait, a nonblocking read).
func NewParkFD(fd int, ready func(fd int) bool) *ParkFD {
	unix.SetNonblock(fd, true) // os.NewFile registers nonblocking descriptors with the poller
	f := os.NewFile(uintptr(fd), "sdpshim-park")
	p := &ParkFD{fd: fd, f: f, ready: ready}
	p.readFn = func(fd uintptr) bool { return ready(int(fd)) }
	if rc, err := f.SyscallConn(); err == nil && f.SetReadDeadline(time.Time{}) == nil {
		p.rc, p.parked = rc, true
	}
	return p
}

// Wait returns nil once ready(fd) reports true, calling it first and again
// after each readiness edge of fd. At the deadline (zero: none) it
// returns os.ErrDeadlineExceeded; after Close, an error.
func (p *ParkFD) Wait(deadline time.Time) error {
	if !p.parked {
		return p.block(deadline)
	}
	if err := p.f.SetReadDeadline(deadline); err != nil {
		return err
	}
	err := p.rc.Read(p.readFn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// block is Wait without the poller.
func (p *ParkFD) block(deadline time.Time) error {
	for !p.ready(p.fd) {
		ms := -1
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		pfd := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, ms); err != nil && err != unix.EINTR {
			return err
		}
	}
	return nil
}

// Close reports the descriptor as closing (FDHook) and closes it; waits
// in progress end with an error.
func (p *ParkFD) Close() {
	fdhook.NoteClosing(p.fd)
	p.f.Close()
}
