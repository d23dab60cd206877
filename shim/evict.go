package shim

import (
	"golang.org/x/sys/unix"
)

// Eviction: the program wants a number the shim holds (dup2/dup3 onto a
// PROTECTED fd). The shim's own eventfds move to another number: a
// socket's wakeup eventfd (wake.go) and an epoll set's self eventfd
// (epoll.go). The kernel epoll registrations follow (under the same
// tokens), and anyone asleep on the old number gets a wakeup and finds
// the new one. Descriptors of the Go runtime and of the channels' provider
// cannot move (the runtime and the transports keep their numbers): EBUSY.

// Evict is the evict hook: 0 when fd is free for the program (no longer
// protected), or -EBUSY.
func (p *Process) Evict(fd int) int64 {
	var sock *Socket
	var set *epollSet
	p.mu.Lock()
	for s := range p.live {
		if int(s.wake.efd.Load())-1 == fd {
			sock = s
			break
		}
	}
	if sock == nil {
		for ep := range p.epolls {
			ep.mu.Lock()
			own := ep.selfFD == fd
			ep.mu.Unlock()
			if own {
				set = ep
				break
			}
		}
	}
	p.mu.Unlock()
	switch {
	case sock != nil && sock.moveEventFD(fd):
		return 0
	case set != nil && set.moveSelf(fd):
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

// moveEventFD moves the socket's wakeup eventfd off old.
func (s *Socket) moveEventFD(old int) bool {
	p := s.p
	nfd := p.moveFD(old)
	if nfd < 0 {
		return false
	}
	w := &s.wake
	w.efdMu.Lock()
	if int(w.efd.Load())-1 != old {
		w.efdMu.Unlock()
		p.unprotect(nfd)
		unix.Close(nfd)
		return false
	}
	w.efd.Store(int32(nfd) + 1)
	if ds := s.direct(); ds != nil && ds.myEFD == old {
		// The interposer's event waits sleep on the handle's number.
		ds.myEFD = nfd
		ds.conn.SetEventFDs(nfd, ds.peerEFD)
	}
	w.efdMu.Unlock()
	s.mu.Lock()
	sets := s.epollsLocked()
	s.mu.Unlock()
	for _, set := range sets {
		set.stale()
		set.mu.Lock()
		for _, e := range set.entries {
			if e.sock == s && e.efdReg && e.efd == old {
				set.add(nfd, unix.EPOLLIN|unix.EPOLLET, e.token)
				unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, old, nil)
				e.efd = nfd
			}
		}
		set.mu.Unlock()
	}
	p.unprotect(old) // the program's dup2 closes it
	eventfdAdd(nfd)  // sleepers on the old number look again
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
