package shim

import (
	"crypto/subtle"
	"errors"
	"net/netip"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/shim/config"
)

// Deferred acceptance, the connector's side (core/rendezvous/deferred.go
// has the protocol). A connect() to a group listener (its fd shared with
// fork children: pre-fork servers) makes no offer: nobody knows yet
// which process will use the connection. The connector writes a record
// (Node.Defer; under a pending name until the connect() picked the port,
// then under the 4-tuple: core/rendezvous/unboundrec.go), makes the real
// connect and waits, deferred: writes go
// onto the kernel socket on the direct path, into the early buffer in the
// channel modes (early.go), reads wait or get EAGAIN, poll and epoll
// see a connecting socket (its wake word and its sleepers' kicks ring when it moves
// on). The process that first uses the accepted fd PULLs (handlePull):
// the connector then makes a normal offer to that process and commits it,
// and the connection goes on as any connecting socket whose verdict is
// pending. The connector alone decides, under the socket's lock, between
// a PULL and falling back:
//
//   - deferDeadline after the connect, nobody pulled: kernel TCP, the
//     early bytes first (reason deferred-unclaimed);
//   - bytes (or a FIN) arrive on the kernel socket: the acceptor uses it
//     plainly (no shim there, or a use the shim did not see): fall back
//     at once (deferred-acceptor-plain);
//   - the program closes its last fd: the early bytes go to the kernel
//     socket, which it then closes (as on kernel TCP).
//
// A PULL after the decision is refused with the reason: the puller then
// uses kernel TCP too. So both ends always agree, and no byte is lost or
// carried twice: nothing goes on the kernel socket but the writes before
// the pull, which the offer counts and the puller moves into the area
// before its verdict (or leaves there when it does not claim), until the
// connector falls back; nothing on a stream until the puller claimed it.

// deferDeadline is how long a deferred connection waits for its first
// user. It covers what a pre-fork server does between accept() and its
// first read or write: a postmaster's fork of the backend (milliseconds),
// a worker's epoll_ctl; it is short because a server that waits in
// poll()/select() on the socket before its first read (the interposer
// treats the undecided fd as a kernel fd there) sees the request only
// after it.
const deferDeadline = time.Second

// deferState is where a deferral stands (guarded by the socket's lock).
type deferState uint8

const (
	defWaiting deferState = iota // no PULL yet
	defPulling                   // a PULL is being answered: the offer is under way
	defDone                      // offered and committed, or fallen back
)

// deferral is a connecting socket's deferred acceptance.
type deferral struct {
	rec   rendezvous.Deferral
	key   deferKey
	state deferState    // guarded by the socket's mu
	done  chan struct{} // closed when state becomes defDone
}

// deferKey finds a deferred socket from a PULL: the connector's port and
// the destination (the puller's local address); for a deferral through a
// NAT (crossns.go) the port alone, server left zero: the puller's address
// is not the one dialled, and the port is unique to this bound socket.
type deferKey struct {
	port   uint16
	server netip.AddrPort
}

func deferKeyOf(client, server netip.AddrPort) deferKey {
	return deferKey{port: client.Port(), server: netip.AddrPortFrom(server.Addr().Unmap().WithZone(""), server.Port())}
}

var (
	errDeferUnclaimed = errors.New("no process used the accepted connection within the deadline")
	errDeferPlain     = errors.New("the acceptor sent on kernel TCP")
	errNoDeferWatch   = errors.New("no switch watcher to watch the deferral")
	errDeferClosed    = errors.New("closed before any process used the accepted connection")
	errPullNonce      = errors.New("pull: wrong nonce or address")
)

// connectDeferredLocked connects fd to a group listener (t: its local
// address, port 0 when the kernel's connect() is to pick it, and the
// destination) with the deferral set up first; nat: to a service address,
// the record filed by the source alone (crossns.go). It returns what
// Connect returns: 0, -EINPROGRESS, or the kernel's -errno (the socket
// then plain); Pass when the record cannot be written.
//
// +checklocks:s.mu
func (s *Socket) connectDeferredLocked(fd int, node *rendezvous.Node, t rendezvous.Tuple, raw []byte, fields logrus.Fields, nat bool) int64 {
	p := s.p
	key := deferKeyOf(t.Client, t.Server)
	var rec rendezvous.Deferral
	var err error
	if nat {
		key = deferKey{port: t.Client.Port()} // crossns.go
		rec, err = node.DeferNAT(t)
	} else {
		rec, err = node.Defer(t, fd)
	}
	if err != nil {
		p.fallback(rendezvous.ReasonOf(err), fd, fields, err)
		s.fallBackLocked()
		return Pass
	}
	def := &deferral{rec: rec, key: key, done: make(chan struct{})}
	if !rec.Pending() {
		p.fileDeferral(def, s)
	}
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)))
	pc := &pendingConnect{dst: t.Server, def: def, kernelDone: errno == 0}
	if errno != 0 && errno != unix.EINPROGRESS {
		s.endDeferLocked(pc)
		p.count("connect.failed")
		s.fallBackLocked()
		return negErrno(errno)
	}
	if s.wake.word == nil {
		s.wake.init(p, p.words.get())
	}
	s.pend = pc
	s.setState(sockConnecting)
	for _, f := range s.fds {
		p.host.SetFDState(f, FDManaged)
	}
	p.count("connect.deferred")
	if def.rec.Pending() {
		// The kernel picked the port: the record is named by it now,
		// before the program can write (unboundrec.go).
		local, err := sockName(fd)
		if err == nil {
			def.key = deferKeyOf(local, t.Server)
			p.fileDeferral(def, s)
			err = node.BindDeferred(&def.rec, local)
		}
		if err != nil {
			s.deferFallbackLocked(rendezvous.ReasonOf(err), err)
			return negErrno(errno) // the connect was made: plain from here
		}
	}
	if !p.swatch.watchDeferred(p, s, fd) {
		s.deferFallbackLocked(rendezvous.ReasonDeferredUnclaimed, errNoDeferWatch)
		return negErrno(errno) // the connect was made: plain from here
	}
	p.deadlines.after(func() { s.deferFallback(pc, rendezvous.ReasonDeferredUnclaimed, errDeferUnclaimed) })
	p.log.WithFields(fields).Debug("connecting to a group listener: deferred")
	return negErrno(errno)
}

// fileDeferral makes def's socket s the one a PULL of def.key finds.
func (p *Process) fileDeferral(def *deferral, s *Socket) {
	p.mu.Lock()
	p.deferred[def.key] = s
	p.mu.Unlock()
}

// deferredEvent answers an event of a deferred connection's kernel
// socket, which the switch watcher holds while no PULL came
// (switchWatch.watchDeferred): readable, the acceptor went on over
// kernel TCP, or failed; either way it falls back. It reports whether s
// was such a connection.
func (s *Socket) deferredEvent(events uint32) bool {
	if s.getState() != sockConnecting {
		return false // most events are of accelerated sockets: no lock for them
	}
	s.mu.Lock()
	pc := s.pend
	deferred := s.getState() == sockConnecting && pc != nil && pc.def != nil && pc.answer == nil
	s.mu.Unlock()
	if !deferred {
		return false
	}
	r, why := rendezvous.ReasonDeferredPlain, errDeferPlain
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP) == 0 {
		r, why = rendezvous.ReasonPeerGone, errors.New("kernel socket failed while deferred")
	}
	s.deferFallback(pc, r, why)
	return true
}

// deferFallback falls back the deferred connection pc unless it was
// decided already.
func (s *Socket) deferFallback(pc *pendingConnect, r rendezvous.Reason, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pend == pc && pc.def.state == defWaiting {
		s.deferFallbackLocked(r, why)
	}
}

// deferFallbackLocked makes the deferred connection plain kernel TCP:
// the record goes, the early bytes go to the kernel socket, every fd is
// UNMANAGED, sleepers wake.
//
// +checklocks:s.mu
func (s *Socket) deferFallbackLocked(r rendezvous.Reason, why error) {
	pc := s.pend
	s.endDeferLocked(pc)
	s.pend = nil
	if len(s.fds) > 0 {
		s.p.fallback(r, s.fds[0], logrus.Fields{"remote": pc.dst}, why)
	}
	s.fallBackLocked()
}

// endDeferLocked ends pc's deferral: out of the process's table, the
// record removed, waiters of done released.
//
// +checklocks:s.mu
func (s *Socket) endDeferLocked(pc *pendingConnect) {
	def := pc.def
	if def == nil || def.state == defDone {
		return
	}
	def.state = defDone
	close(def.done)
	p := s.p
	p.mu.Lock()
	if p.deferred[def.key] == s {
		delete(p.deferred, def.key)
	}
	node := p.node
	p.mu.Unlock()
	if node != nil {
		node.Undefer(def.rec)
	}
}

// handlePull is the rendezvous OnPull: a process wants to use a
// connection this process deferred. If it still waits, the connection is
// offered to that process (channel reused or set up, stream opened by its
// Handler) and the offer committed; the socket then waits for the
// verdict like any connecting socket. Otherwise the PULL is refused with
// the reason the connection fell back.
func (p *Process) handlePull(req rendezvous.PullRequest) error {
	key := deferKeyOf(req.Tuple.Client, req.Tuple.Server)
	p.mu.Lock()
	s := p.deferred[key]
	if s == nil {
		key = deferKey{port: req.Tuple.Client.Port()}
		s = p.deferred[key]
	}
	node := p.node
	p.mu.Unlock()
	if s == nil || node == nil {
		return &rendezvous.FallbackError{Reason: rendezvous.ReasonDeferredUnclaimed, Err: errors.New("no deferred connection for " + req.Tuple.String())}
	}
	s.mu.Lock()
	pc := s.pend
	if s.getState() != sockConnecting || pc == nil || pc.def == nil || pc.def.key != key || pc.def.state != defWaiting || len(s.fds) == 0 {
		s.mu.Unlock()
		return &rendezvous.FallbackError{Reason: rendezvous.ReasonDeferredUnclaimed, Err: errors.New("connection decided already")}
	}
	fd := s.fds[0]
	local, err := sockName(fd)
	t := rendezvous.Tuple{Client: local, Server: pc.dst}
	if pc.def.rec.NAT {
		t.Server = req.Tuple.Server // where the NAT took the connection
	}
	if err != nil || subtle.ConstantTimeCompare(req.Nonce[:], pc.def.rec.Nonce[:]) != 1 ||
		local.Addr().Unmap() != req.Tuple.Client.Addr().Unmap() || local.Port() != req.Tuple.Client.Port() {
		s.mu.Unlock()
		return &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: errPullNonce}
	}
	if !pc.kernelDone {
		if kernelPoll(fd, unix.POLLOUT)&unix.POLLOUT == 0 {
			// Accepted over there means connected here: this socket failed.
			s.deferFallbackLocked(rendezvous.ReasonPeerGone, errors.New("pulled while the kernel connect is not complete"))
			s.mu.Unlock()
			return &rendezvous.FallbackError{Reason: rendezvous.ReasonPeerGone, Err: errors.New("connect not complete")}
		}
		pc.kernelDone = true
	}
	if kernelPoll(fd, unix.POLLIN|pollRDHUP) != 0 {
		// The acceptor wrote (or shut down) on kernel TCP: that is where
		// the connection is.
		s.deferFallbackLocked(rendezvous.ReasonDeferredPlain, errDeferPlain)
		s.mu.Unlock()
		return &rendezvous.FallbackError{Reason: rendezvous.ReasonDeferredPlain, Err: errDeferPlain}
	}
	pc.def.state = defPulling // from here writes wait for the verdict (early.go)
	early := uint32(s.earlyKernel)
	s.mu.Unlock()

	var offered *pendingConnect
	var oerr error
	if p.cfg.Channel == config.ChannelDirect {
		// On the PULL's own connection: the puller claims it there, and
		// neither side dials the other's server for it.
		// Its writes so far are on the kernel socket (early), where the
		// puller takes them from; none went into the area.
		offered, oerr = p.offerDirectTo(node, req.From, t, early, func(_ *directStream, pl rendezvous.Payload) (*rendezvous.Answer, error) {
			return req.OfferHere(t, pl)
		}, -1)
	} else {
		offered, oerr = p.offer(node, req.From, t, fd, false)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pend != pc || s.getState() != sockConnecting {
		// Closed meanwhile with nothing to send (closeBeforeVerdict takes
		// over a close with early bytes).
		if offered != nil {
			offered.abandon()
		}
		s.endDeferLocked(pc)
		return &rendezvous.FallbackError{Reason: rendezvous.ReasonPeerGone, Err: errors.New("connector closed")}
	}
	if oerr == nil {
		if oerr = offered.answer.Commit(); oerr != nil {
			offered.abandon()
		}
	}
	if oerr != nil {
		pc.def.state = defWaiting // for deferFallbackLocked
		s.deferFallbackLocked(rendezvous.ReasonOf(oerr), oerr)
		return oerr
	}
	pc.answer, pc.end, pc.id, pc.direct = offered.answer, offered.end, offered.id, offered.direct
	pc.unanswered = offered.unanswered
	s.ringLocked() // early bytes' rings, before the verdict (connectOfferedLocked)
	s.endDeferLocked(pc)
	if len(s.early) > 0 || s.pendShut.Load() != 0 {
		s.startPushLocked()
	}
	s.wake.wakeEverything() // sleepers now wait for the verdict
	p.log.WithFields(logrus.Fields{"remote": pc.dst, "puller": req.From.PID, "stream": pc.id}).Debug("deferred connection pulled: offered")
	return nil
}

// settleDeferredLocked moves a deferred connection on without blocking:
// its kernel connect must complete; then it waits for the decision (its
// wake word and its sleepers' kicks ring).
//
// +checklocks:s.mu
func (s *Socket) settleDeferredLocked(pc *pendingConnect) settleResult {
	if !pc.kernelDone {
		fd := s.fds[0]
		switch rev := kernelPoll(fd, unix.POLLOUT); {
		case rev&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			s.endDeferLocked(pc)
			s.pend = nil
			s.p.count("connect.failed")
			s.fallBackLocked()
			return settleResult{fallback: true}
		case rev&unix.POLLOUT == 0:
			return settleResult{waitFD: fd, waitEvents: unix.POLLOUT}
		}
		pc.kernelDone = true
	}
	return settleResult{waitFD: -1}
}

// deferredCloseWait bounds how long a close waits for a PULL being
// answered (the offer's own bound, and some).
const deferredCloseWait = offerTimeout + time.Second

// closeDeferred handles the close of the last fd (fd) of a deferred
// connection. Still waiting: it falls back now, the early bytes going to
// the kernel socket before the close (the socket is plain). Being pulled:
// the close finishes in the background on a protected duplicate once the
// offer is decided. Otherwise nothing.
//
// +checklocks:s.mu
func (s *Socket) closeDeferredLocked(fd int) {
	pc := s.pend
	if s.getState() != sockConnecting || pc == nil || pc.def == nil || pc.answer != nil {
		return
	}
	switch pc.def.state {
	case defWaiting:
		s.deferFallbackLocked(rendezvous.ReasonDeferredUnclaimed, errDeferClosed)
	case defPulling:
		kfd, err := dupHigh(fd)
		if err != nil {
			return
		}
		s.p.protect(kfd)
		s.fds = []int{fd, kfd} // the close removes fd; kfd carries on
		go s.finishDeferredClose(kfd, pc)
	}
}

// finishDeferredClose waits for the PULL being answered for pc, then
// finishes the close through kfd: as a close before the verdict when the
// offer went, else plain (the answer's fallback wrote the early bytes).
func (s *Socket) finishDeferredClose(kfd int, pc *pendingConnect) {
	select {
	case <-pc.def.done:
	case <-time.After(deferredCloseWait):
	}
	s.mu.Lock()
	if s.pend == pc && pc.answer != nil {
		afd := pc.answer.Fd()
		s.fds = nil
		s.mu.Unlock()
		s.finishClose(kfd, afd, nil)
		return
	}
	if s.pend == pc && s.getState() == sockConnecting {
		pc.def.state = defWaiting
		s.deferFallbackLocked(rendezvous.ReasonDeferredUnclaimed, errDeferClosed)
	}
	s.fds = nil
	s.mu.Unlock()
	s.close()
	s.p.unprotect(kfd)
	unix.Close(kfd)
}
