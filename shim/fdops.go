package shim

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/wait"
)

// Close is the close hook: fd is being released (close, close_range,
// closefrom, dup2/dup3 onto it). The kernel fd is still open; the
// interposer closes it right after. The socket closes with its last fd:
// a listener is unregistered, a connecting socket's offer given up, an
// accelerated stream closed (a FIN after the queued bytes, or a reset
// when unread bytes are discarded, as TCP does).
func (p *Process) Close(fd int) {
	if e := p.fds.get(fd); e != nil && e.sock != nil && p.closeShared(e.sock, fd) {
		return
	}
	e := p.fds.take(fd)
	if e == nil {
		return
	}
	if e.ep != nil {
		e.ep.closeFD(fd)
		return
	}
	s := e.sock
	s.mu.Lock()
	if len(s.fds) == 1 {
		// A deferred connection's last fd: falls back now, or finishes
		// in the background (deferred.go).
		s.closeDeferredLocked(fd)
	}
	if len(s.fds) == 1 && s.getState() == sockConnecting && s.pend != nil && s.pend.kernelDone {
		// The last fd of a connection the acceptor may have taken: take
		// the stream, so that the peer reads this close (FIN or reset)
		// on it rather than on a stream nobody ends.
		s.settleLocked()
	}
	for i, f := range s.fds {
		if f == fd {
			s.fds = append(s.fds[:i], s.fds[i+1:]...)
			break
		}
	}
	if ds := s.direct(); ds != nil {
		ds.detach(fd)
	}
	s.ringLocked() // before the interposer closes fd
	sets := s.epollsLocked()
	last := len(s.fds) == 0
	s.mu.Unlock()
	if last {
		// An epoll entry belongs to the open socket, not to the number:
		// it goes when the last copy closes.
		for _, set := range sets {
			set.forgetSocket(s)
		}
		if !s.closeBeforeVerdict(fd) {
			s.kernelFINFirst(fd)
			s.close()
		}
	}
}

// closeShared handles the close of s's last fd (fd) while a fork child
// may still hold its kernel socket (forkkeep.go): the kernel keeps such a
// connection open for the child, so the stream must not end here. One the
// child goes on with over the area is kept open as a ghost (it reports
// true: the close is done); any other is switched to kernel TCP first.
func (p *Process) closeShared(s *Socket, fd int) bool {
	s.mu.Lock()
	last := len(s.fds) == 1 && s.fds[0] == fd
	s.mu.Unlock()
	if !last || s.getState() != sockAccelerated {
		return false
	}
	shared, forked := p.sharedWithChild(s)
	if !shared {
		return false
	}
	if !forked && p.ghost(s, fd) {
		return true
	}
	s.switchAsForker()
	return false
}

// kernelFINFirst sends the FIN of a direct connection's kernel socket
// (fd, its last fd, still open) before the FIN in the area, on a close
// that ends it gracefully. The peer can see the area's FIN and close its
// own socket within a microsecond; had its kernel FIN gone first, the
// TIME_WAIT would be on the peer's side, where kernel TCP leaves it on
// this one (the end that closed first), and a server that does not set
// SO_REUSEADDR could not bind its port again after its clients hung up.
// The peer's switch watcher may meet this FIN before the area's: it then
// ends the stream itself after the same blocks (peerGone), as the area's
// FIN would. Not while a switch to kernel TCP runs: its records still go
// on the kernel socket. The switch watcher lets the socket go first (as
// the close does after): the peer, which reads the end and closes at
// once, would otherwise wake it with its own FIN.
func (s *Socket) kernelFINFirst(fd int) {
	if s.getState() == sockAccelerated && s.direct() != nil && s.sw.Load() == swNone && !s.abortClose.Load() && s.earlyN.Load() == 0 {
		s.p.unwatchSwitch(s, fd)
		unix.Shutdown(fd, unix.SHUT_WR)
	}
}

// closeBeforeVerdict handles the close of the last fd of a connection the
// acceptor has not claimed yet: as on kernel TCP, the peer must still get
// what was written (early.go) and then the end of the stream when it
// accepts. The kernel connection is kept open (a protected duplicate of
// fd) and the close finishes in the background once the verdict comes
// (or after closeVerdictWait, when the bytes go to the kernel socket). It
// reports whether it took the close over.
func (s *Socket) closeBeforeVerdict(fd int) bool {
	s.mu.Lock()
	pc := s.pend
	if s.getState() != sockConnecting || pc == nil || (pc.answer == nil && pc.post == nil) || !pc.kernelDone {
		s.mu.Unlock()
		return false
	}
	kfd, err := dupHigh(fd)
	if err != nil {
		s.mu.Unlock()
		return false
	}
	s.p.protect(kfd)
	afd := -1
	if pc.answer != nil {
		afd = pc.answer.Fd()
	}
	po := pc.post
	s.mu.Unlock()
	go s.finishClose(kfd, afd, po)
	return true
}

// closeVerdictWait bounds the wait for an acceptor to claim a connection
// closed before it did.
const closeVerdictWait = 60 * time.Second

// finishClose waits for the verdict on answerFD, settles the socket through
// kfd, closes it, and closes kfd.
func (s *Socket) finishClose(kfd, answerFD int, po *direct.Post) {
	if po != nil {
		s.mu.Lock()
		s.fds = []int{kfd} // settling looks at the kernel socket (post.go)
		s.mu.Unlock()
		s.waitPost(po, time.Now().Add(closeVerdictWait))
	} else if dup, err := dupHigh(answerFD); err == nil {
		wait.WaitFD(dup, unix.POLLIN, time.Now().Add(closeVerdictWait)) // the verdict, or its end
		unix.Close(dup)
	}
	s.mu.Lock()
	if s.getState() == sockConnecting {
		s.fds = []int{kfd}
		s.settleLocked()
		if pc := s.pend; s.getState() == sockConnecting && pc != nil && (pc.answer != nil || pc.post != nil) {
			// Never claimed: the bytes go to the kernel socket.
			s.pend = nil
			s.takeBackEarlyLocked(pc.direct)
			pc.abandon()
			s.fallBackLocked()
		}
		s.fds = nil
	}
	s.mu.Unlock()
	s.close()
	s.p.unprotect(kfd)
	unix.Close(kfd)
}

// close ends a socket whose last fd is gone.
func (s *Socket) close() {
	s.mu.Lock()
	state := s.getState()
	s.setState(sockClosed)
	if su := s.setup; su.done != 0 && state == sockAccelerated {
		now := nowNS()
		s.p.short.record(su.dst, time.Duration(su.done-su.began), time.Duration(now-su.done), su.probe)
	} else if su.probe {
		s.p.short.probeEnded(su.dst)
	}
	s.unregisterLocked()
	if pc := s.pend; pc != nil {
		s.endDeferLocked(pc)
		s.pend = nil
		if pc.answer != nil || pc.post != nil { // neither: the offer is being made (connectAsync gives it up)
			pc.abandon()
		}
	}
	s.mu.Unlock()
	if state != sockAccelerated {
		s.p.unwatchSwitch(s, -1) // watched while deferred (deferred.go)
		if state == sockConnecting && s.wake.word != nil {
			s.wake.release(s.p)
		}
		return
	}
	p := s.p
	st := s.stream.Load()
	p.unwatchSwitch(s, -1) // forkswitch.go
	p.tids.forget(s)
	s.dropAttendance()
	st.ReadReady() // takes arrived blocks: data unread at close means a reset
	s.closeWithEarly(st, s.abortClose.Load())
	s.closeStats()
	st.SetNotify(nil)
	s.wake.release(p)
	p.noteDraining(st)
	p.mu.Lock()
	delete(p.live, s)
	p.forkWorkLocked()
	p.mu.Unlock()
}

// Dup is the dup hook: newfd now names what oldfd names (dup, dup2, dup3,
// F_DUPFD, F_DUPFD_CLOEXEC). It returns the state to record for newfd.
func (p *Process) Dup(oldfd, newfd int) FDState {
	e := p.fds.get(oldfd)
	if e == nil && p.lookup(oldfd) != nil { // adopted now: the copies stay one socket
		e = p.fds.get(oldfd)
	}
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
	if st := s.getState(); len(s.fds) == 0 || st == sockFallback || st == sockClosed {
		return FDUnmanaged
	}
	s.fds = append(s.fds, newfd)
	p.fds.set(newfd, e)
	if ds := s.direct(); ds != nil && s.getState() == sockAccelerated {
		ds.attach(newfd)
	}
	return p.host.FDState(oldfd)
}

// Nonblock is the nonblock hook: O_NONBLOCK changed on fd.
func (p *Process) Nonblock(fd int, on bool) {
	if s := p.fds.socket(fd); s != nil {
		s.nonblock.Store(on)
		s.syncDirect()
	}
}
