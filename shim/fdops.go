package shim

import (
	"golang.org/x/sys/unix"
)

// Close is the close hook: fd is being released (close, close_range,
// closefrom, dup2/dup3 onto it). The kernel fd is still open; the
// interposer closes it right after. The socket closes with its last fd:
// a listener is unregistered, a connecting socket's offer given up, an
// accelerated stream closed (a FIN after the queued bytes, or a reset
// when unread bytes are discarded, as TCP does).
func (p *Process) Close(fd int) {
	e := p.fds.take(fd)
	if e == nil {
		return
	}
	if e.ep != nil {
		e.ep.closeFD()
		return
	}
	s := e.sock
	s.mu.Lock()
	for i, f := range s.fds {
		if f == fd {
			s.fds = append(s.fds[:i], s.fds[i+1:]...)
			break
		}
	}
	sets := make([]*epollSet, 0, len(s.epolls))
	for set := range s.epolls {
		sets = append(sets, set)
	}
	last := len(s.fds) == 0
	s.mu.Unlock()
	for _, set := range sets {
		set.forgetFD(fd, s)
	}
	if last {
		s.close()
	}
}

// close ends a socket whose last fd is gone.
func (s *Socket) close() {
	s.mu.Lock()
	state := s.getState()
	s.setState(sockClosed)
	s.unregisterLocked()
	if pc := s.pend; pc != nil {
		s.pend = nil
		pc.answer.Close()
		pc.end.giveUp(pc.id)
	}
	s.mu.Unlock()
	if state != sockAccelerated {
		if state == sockConnecting && s.wake.word != nil {
			s.wake.release(s.p)
		}
		return
	}
	p := s.p
	st := s.stream.Load()
	p.tids.forget(s)
	s.dropAttendance()
	st.Close()
	st.SetNotify(nil)
	s.wake.release(p)
	p.noteDraining(st)
	p.mu.Lock()
	delete(p.live, s)
	p.mu.Unlock()
}

// Dup is the dup hook: newfd now names what oldfd names (dup, dup2, dup3,
// F_DUPFD, F_DUPFD_CLOEXEC). It returns the state to record for newfd.
func (p *Process) Dup(oldfd, newfd int) FDState {
	e := p.fds.get(oldfd)
	if e == nil {
		return FDUnmanaged
	}
	if e.ep != nil {
		e.ep.mu.Lock()
		e.ep.fds++
		e.ep.mu.Unlock()
		p.fds.set(newfd, e)
		return FDManaged
	}
	s := e.sock
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fds) == 0 || s.getState() == sockFallback || s.getState() == sockClosed {
		return FDUnmanaged
	}
	s.fds = append(s.fds, newfd)
	p.fds.set(newfd, e)
	return p.host.FDState(oldfd)
}

// Evict is the evict hook: the program wants fd, which the core holds, as
// a dup2/dup3 target. The core's descriptors cannot move (kernel epoll
// registrations and the runtime refer to them by number): -EBUSY, the
// program's call fails with EBUSY.
func (p *Process) Evict(fd int) int64 { return negErrno(unix.EBUSY) }

// Nonblock is the nonblock hook: O_NONBLOCK changed on fd.
func (p *Process) Nonblock(fd int, on bool) {
	if s := p.fds.socket(fd); s != nil {
		s.nonblock.Store(on)
	}
}
