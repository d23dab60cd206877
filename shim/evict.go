package shim

import (
	"golang.org/x/sys/unix"
)

// Eviction: the program wants a number the shim holds (dup2/dup3 onto a
// PROTECTED fd). The shim's own eventfds move to another number: an
// epoll set's self and kick eventfds (epoll.go). The kernel epoll
// registrations follow (under the same tokens). Descriptors of the Go
// runtime and of the channels' provider cannot move (the runtime and the
// transports keep their numbers): EBUSY. (A socket has no fd of the
// shim's: wake.go.)

// Evict is the evict hook: 0 when fd is free for the program (no longer
// protected), or -EBUSY.
func (p *Process) Evict(fd int) int64 {
	p.mu.Lock()
	sets := make([]*epollSet, 0, len(p.epolls))
	for ep := range p.epolls {
		sets = append(sets, ep)
	}
	p.mu.Unlock()
	for _, set := range sets {
		if set.moveSelf(fd) || set.moveKick(fd) {
			return 0
		}
	}
	if p.moveSpareBell(fd) {
		return 0
	}
	return negErrno(unix.EBUSY)
}

// moveFD duplicates the shim's fd old onto a protected number among the
// shim's high ones (highFD); -1 when it cannot.
func (p *Process) moveFD(old int) int {
	nfd, err := dupHigh(old)
	if err != nil {
		return -1
	}
	p.protect(nfd)
	return nfd
}

// moveKick moves the set's kick eventfd off old. The interposer's
// snapshot names it: the set publishes again.
func (set *epollSet) moveKick(old int) bool {
	set.stale()
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.kickFD != old {
		return false
	}
	nfd := set.p.moveFD(old)
	if nfd < 0 {
		return false
	}
	if set.add(nfd, unix.EPOLLIN|unix.EPOLLET, set.kickToken) != nil {
		set.p.closeFD(nfd)
		return false
	}
	unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, old, nil)
	set.unpublishLocked()
	set.kickMu.Lock()
	set.kickFD = nfd
	set.kickMu.Unlock()
	if set.bell > 0 {
		set.p.bells.moved(set.bell, nfd) // the peers' copies are of the same eventfd
	}
	set.p.unprotect(old) // the program's dup2 closes it
	eventfdAdd(nfd)      // a sleeper looks again
	return true
}

// moveSpareBell moves the spare bell (bells.go) off old.
func (p *Process) moveSpareBell(old int) bool {
	if !p.bells.moveSpare(old, p.moveFD) {
		return false
	}
	p.unprotect(old) // the program's dup2 closes it
	return true
}

// moveSelf moves the set's self eventfd off old.
func (set *epollSet) moveSelf(old int) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.selfFD != old {
		return false
	}
	nfd := set.p.moveFD(old)
	if nfd < 0 {
		return false
	}
	if set.add(nfd, unix.EPOLLIN, set.selfToken) != nil {
		set.p.unprotect(nfd)
		unix.Close(nfd)
		return false
	}
	unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, old, nil)
	set.selfFD = nfd
	set.p.unprotect(old)
	return true
}
