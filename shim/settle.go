package shim

import (
	"cmp"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
)

// active returns the stream of an accelerated socket for a data call
// (dontwait: the call's MSG_DONTWAIT). For a connecting socket it moves
// the connection on (settle); when the call must not go on now it
// returns nil and the hook's result: Pass (plain kernel TCP, or not
// connected yet), -EAGAIN (O_NONBLOCK or dontwait), or WaitResult with w set: a
// poll of the descriptor the connection waits for (the TCP socket while
// its connect runs, the rendezvous connection while the verdict is
// pending), or a futex sleep on the socket's wake word while a
// nonblocking connect's offer is being made. recv: the call receives (a
// posted offer's verdict may then come with the acceptor's first bytes,
// post.go).
func (s *Socket) active(w *Wait, dontwait, recv bool) (dataStream, int64) {
	st, state := s.streamNow()
	if st != nil {
		if s.sw.Load() == swBusy { // switching to kernel TCP (forkswitch.go)
			return nil, s.switchWait(w, false, swReplay)
		}
		return st, 0
	}
	if state == sockAdopted {
		// Accepted on a group listener: this is its first use.
		s.resolve()
		if st := s.stream.Load(); st != nil {
			return st, 0
		}
		return nil, Pass
	}
	if state != sockConnecting {
		return nil, Pass
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.wake.gen()
	blocking := !s.nonblock.Load() && !dontwait
	r := s.settleForLocked(recv && blocking)
	for blocking && !r.sleeping() {
		r = s.settleForLocked(recv)
	}
	switch {
	case r.stream != nil:
		return r.stream, 0
	case r.fallback:
		return nil, Pass
	case s.nonblock.Load() || dontwait:
		return nil, negErrno(unix.EAGAIN)
	}
	if r.waitWord != nil {
		// A posted offer's verdict: the acceptor wakes the post's word
		// (or, for a receive, the area's: post.go).
		*w = Wait{Kind: WaitFutex, Word: r.waitWord, Val: r.waitVal, Timeout: int64(cmp.Or(r.waitFor, watchSlice))}
		return nil, WaitResult
	}
	if r.waitFD < 0 {
		// The offer of a nonblocking connect is being made: its end rings
		// the wake word.
		s.wake.expose()
		*w = Wait{Kind: WaitFutex, Word: s.wake.word, Val: gen, Timeout: -1}
		return nil, WaitResult
	}
	// The calling thread polls the descriptor itself, in the interposer: a
	// watcher goroutine cost a goroutine, a thread hop and a wake of the
	// runtime per connection. The slice bounds the sleep when another
	// thread changes the socket meanwhile (a close: the number may go).
	*w = Wait{Kind: WaitFD, FD: int32(r.waitFD), Events: r.waitEvents, Timeout: int64(watchSlice)}
	return nil, WaitResult
}

// streamNow returns the socket's stream, or nil and the state it is in
// without one (state is meaningful only when the stream is nil). A stream,
// once stored, stays: one load answers an accelerated socket's data call.
// Without one, the state is read and then the stream again, so that they
// agree: a socket becomes accelerated with its stream stored before its
// state (accelerateLocked), and another thread may do that at any moment
// (pushEarly, a sibling's call). Read as stream then state, a call could
// find no stream, then the state accelerated, and take the socket for
// plain TCP: its read went to the kernel socket, which carries no data,
// and returned the kernel's EOF or slept there, while the peer's bytes
// waited in the stream.
func (s *Socket) streamNow() (dataStream, sockState) {
	if st := s.stream.Load(); st != nil {
		return st, sockAccelerated
	}
	state := s.getState()
	return s.stream.Load(), state
}

// watchSlice bounds one poll for a connecting socket (a data call's, or
// a watcher goroutine's), so that it notices within it that the socket
// moved on another way.
const watchSlice = 200 * time.Millisecond

// waitFDWhile waits until fd is ready for events (or fails), or until
// going, asked every watchSlice, reports false.
func waitFDWhile(fd int, events int16, going func() bool) {
	for going() {
		if wait.WaitFD(fd, events, time.Now().Add(watchSlice)) != wait.ErrFDTimeout {
			return
		}
	}
}

// settleResult is where a connecting socket stands.
type settleResult struct {
	stream     dataStream // accelerated now
	fallback   bool       // plain kernel TCP now
	waitFD     int        // else: what to wait for
	waitEvents int16
	waitWord   *uint32 // a posted offer's: a blocking call sleeps on its state while it holds waitVal
	waitVal    uint32
	waitFor    time.Duration // waitWord's sleep at most this long (0: watchSlice)
	waitPost   *direct.Post  // waitWord is this post's state (sleeping)
}

// settleLocked moves a connecting socket on without blocking: the kernel
// connect must complete, then the acceptor's verdict decides.
//
// +checklocks:s.mu
func (s *Socket) settleLocked() settleResult { return s.settleForLocked(false) }

// settleForLocked is settleLocked for a call that receives (recv) or not.
//
// +checklocks:s.mu
func (s *Socket) settleForLocked(recv bool) settleResult {
	if st := s.stream.Load(); st != nil {
		return settleResult{stream: st}
	}
	pc := s.pend
	if s.getState() != sockConnecting || pc == nil {
		return settleResult{fallback: true}
	}
	if pc.answer == nil && pc.def != nil {
		return s.settleDeferredLocked(pc) // deferred.go
	}
	if pc.answer == nil && pc.post == nil {
		// The offer of a nonblocking connect is being made (connect.go):
		// its end rings the wakeup (waitFD -1: the socket's own).
		return settleResult{waitFD: -1}
	}
	fd := s.fds[0]
	p := s.p
	if !pc.kernelDone {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		unix.Poll(pfd, 0)
		switch {
		case pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			// The connect failed: the kernel reports it (SO_ERROR is left
			// for the program).
			pc.abandon()
			s.pend = nil
			p.count("connect.failed")
			s.fallBackLocked()
			return settleResult{fallback: true}
		case pfd[0].Revents&unix.POLLOUT == 0:
			return settleResult{waitFD: fd, waitEvents: unix.POLLOUT}
		}
		pc.kernelDone = true
	}
	if pc.post != nil {
		return s.settlePostLocked(pc, recv)
	}
	switch pc.answer.Verdict() {
	case rendezvous.VerdictPending:
		return settleResult{waitFD: pc.answer.Fd(), waitEvents: unix.POLLIN}
	case rendezvous.VerdictDeclined:
		s.takeBackEarlyLocked(pc.direct)
		reason, why := rendezvous.ReasonRefused, error(errDeclined)
		if r := pc.answer.Refusal(); r != nil {
			reason, why = rendezvous.ReasonOf(r), r
		}
		pc.abandon()
		s.pend = nil
		p.fallback(reason, fd, logrus.Fields{"remote": pc.dst}, why)
		s.fallBackLocked()
		return settleResult{fallback: true}
	}
	if pc.unanswered {
		// A committed offer's answer came with the verdict. A malformed
		// one (a peer that claimed the connection all the same): the
		// stream goes on without its bells, its rings over the socket.
		if err := pc.direct.answered(pc.answer.Payload); err != nil {
			p.log.WithError(err).WithField("remote", pc.dst).Warn("malformed answer to an accelerated connection's offer")
			p.count("answer.malformed")
		}
		pc.answer.Payload.CloseFiles()
	}
	pc.answer.Close()
	if pc.direct != nil && pc.direct.where.own != nil && pc.acceptor != "" {
		p.areas.learnMapped(pc.direct.where.own, pc.acceptor) // its next areas' offers may be posted (post.go)
	}
	return s.settledLocked(pc)
}

// settledLocked finishes a connection its acceptor accepted.
//
// +checklocks:s.mu
func (s *Socket) settledLocked(pc *pendingConnect) settleResult {
	p := s.p
	fd := s.fds[0]
	s.pend = nil
	var st dataStream
	var err error
	if pc.direct != nil {
		st = pc.direct
	} else {
		st, err = pc.end.take(pc.id, time.Now().Add(verdictTakeTimeout))
	}
	if err != nil {
		// Cannot happen with a sane peer: it accepted, so it writes into a
		// stream this side does not have. The connection is lost.
		p.log.WithError(err).WithField("remote", pc.dst).Warn("accelerated connection lost at setup")
		p.fallback(rendezvous.ReasonPeerGone, fd, logrus.Fields{"remote": pc.dst}, err)
		pc.end.giveUp(pc.id)
		s.fallBackLocked()
		return settleResult{fallback: true}
	}
	s.accelerateLocked(pc.end, st)
	if p.log.IsLevelEnabled(logrus.DebugLevel) {
		f := logrus.Fields{"remote": pc.dst, "stream": st.ID()}
		if local, err := sockName(fd); err == nil {
			f["local"] = local
		}
		p.log.WithFields(f).Debug("connected accelerated")
	}
	return settleResult{stream: st}
}

// errDeclined: the acceptor's process did not claim the connection.
var errDeclined = errorString("the listener process did not claim the connection")

type errorString string

func (e errorString) Error() string { return string(e) }
