package shim

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Deferred acceptance, the accepting side ("the first user claims"; the
// connector's side is deferred.go). accept() on a group listener decides
// nothing: the new fd stays CANDIDATE (which a fork child inherits) and
// its Socket is adopted. Its first use (a data call, epoll_ctl: whatever
// reaches Socket.active or socketInUse) in whichever process makes it
// resolves it: the record of its 4-tuple names the connector, which is
// PULLed (core/rendezvous/pull.go); a claimed offer makes it accelerated,
// anything else plain kernel TCP.
//
// A process that does not know an fd the interposer says is CANDIDATE
// (a fork child running a fresh core, an fd received from elsewhere)
// adopts it at its first call: a listener (SO_ACCEPTCONN) becomes a group
// listener of this process, registered with its own group entry so that
// connectors still find one when the parent is gone (only where fork
// children run cores, childCores, as in the parent's ForkPrepare; else
// it stays unregistered, its accepts counted fork-exec-decline); a
// connected socket
// becomes adopted as above; an unbound one a created socket.

// acceptedConn is an adopted socket's connection.
type acceptedConn struct {
	local, remote netip.AddrPort
	// rec is the record found when this process accepted it (nil in a
	// process that adopted it: a fork child looks it up at the first
	// use). The PULL checks it with the connector either way.
	rec *rendezvous.Record
}

var errNoPrepared = errors.New("pulled offer without a prepared stream")

// childCoreHost is implemented by a host whose fork children run a core
// of their own (preload/c loads a fresh one in the child). Only then may
// a listener a fork child inherits become a group listener: a child
// without a core never uses an fd through the shim, and its connections
// would each wait out deferDeadline.
type childCoreHost interface {
	// ChildCores reports whether fork children run a core of their own.
	ChildCores() bool
}

// childCores reports whether fork children of this process run a core.
func (p *Process) childCores() bool {
	h, ok := p.host.(childCoreHost)
	return ok && h.ChildCores()
}

// adopt makes a Socket for fd, which the interposer has as CANDIDATE and
// the table does not know. It returns nil (fd set UNMANAGED) when fd is
// not a TCP socket the shim can take.
func (p *Process) adopt(fd int) *Socket {
	domain, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	proto, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err1 != nil || err2 != nil || err3 != nil || typ != unix.SOCK_STREAM ||
		(domain != unix.AF_INET && domain != unix.AF_INET6) || proto != unix.IPPROTO_TCP {
		p.host.SetFDState(fd, FDUnmanaged)
		return nil
	}
	s := &Socket{p: p, family: domain, fds: []int{fd}}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		s.nonblock.Store(fl&unix.O_NONBLOCK != 0)
	}
	if tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO); err == nil {
		s.rcvTimeo.Store(tv.Nano())
	}
	if tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO); err == nil {
		s.sndTimeo.Store(tv.Nano())
	}
	if l, err := unix.GetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER); err == nil {
		s.abortClose.Store(l.Onoff != 0 && l.Linger == 0)
	}
	listening, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	var local, remote netip.AddrPort
	switch {
	case listening == 1:
		s.setState(sockListening)
	default:
		var err error
		remote, err = nameOf(fd, unix.SYS_GETPEERNAME)
		if err == nil {
			local, err = sockName(fd)
		}
		switch {
		case err == nil && remote.IsValid() && local.IsValid():
			s.acc = &acceptedConn{local: local, remote: remote}
			s.setState(sockAdopted)
		case err == unix.ENOTCONN:
			if l, err := sockName(fd); err != nil || l.Port() != 0 {
				// Bound or connecting: not a socket the shim saw made.
				p.host.SetFDState(fd, FDUnmanaged)
				return nil
			}
		default:
			p.host.SetFDState(fd, FDUnmanaged)
			return nil
		}
	}
	if !p.fds.setIfEmpty(fd, &fdEntry{sock: s}) {
		return p.fds.socket(fd) // adopted by another thread meanwhile
	}
	p.count("adopted." + s.getState().String())
	if s.getState() == sockListening {
		s.mu.Lock()
		if p.childCores() {
			p.registerLocked(s, fd, true)
		} else {
			// The parent unregistered it at the fork (fork.go): its
			// connections stay on kernel TCP here too.
			s.unlisted = rendezvous.ReasonForkDecline
		}
		s.mu.Unlock()
	}
	return s
}

// acceptDeferred makes the Socket of fd, accepted on the group listener
// ls (local, peer: its addresses): adopted, resolved at its first use.
//
// A connector that defers writes its record before its connect(), so a
// connection without a usable one when accept() returns it will never be
// pulled: it is plain TCP from here (UNMANAGED), and a fork
// child that inherits it loads no core of its own for it (a shimmed
// postgres serving plain clients: one core per backend, half the
// connections a second).
func (p *Process) acceptDeferred(node *rendezvous.Node, ls *Socket, fd int, local, peer netip.AddrPort, flags int) FDState {
	rec, err := node.FindDeferred(local, peer)
	if err != nil {
		// No record, or one that cannot be used (garbage, the run
		// directory unusable): the first use would find the same.
		p.fallback(rendezvous.ReasonOf(err), fd, logrus.Fields{"local": local, "remote": peer}, err)
		if rendezvous.ReasonOf(err) == rendezvous.ReasonNotShimmed {
			p.notOffered(node)
		}
		return FDUnmanaged
	}
	s := &Socket{p: p, family: ls.family, fds: []int{fd}}
	s.inheritBuffers(ls)
	s.nonblock.Store(flags&unix.SOCK_NONBLOCK != 0)
	s.acc = &acceptedConn{local: local, remote: peer, rec: &rec}
	s.setState(sockAdopted)
	p.fds.set(fd, &fdEntry{sock: s})
	p.count("accept.deferred")
	return FDCandidate
}

// Claim is the claim hook: poll or select is about to wait on fd, a
// CANDIDATE fd of a process that may hold deferred connections. An
// adopted connection is resolved now, as its first use (else the wait
// would watch a kernel socket its connector writes nothing to until its
// deadline); the fd's state is returned.
func (p *Process) Claim(fd int) FDState {
	if s := p.lookup(fd); s != nil && s.getState() == sockAdopted {
		s.resolve()
	}
	return p.host.FDState(fd)
}

// resolve decides an adopted socket at its first use (any thread, any
// process holding it): pulled and claimed, it is accelerated (its fds
// MANAGED); otherwise plain kernel TCP. It may wait up to
// rendezvous.PullWait.
func (s *Socket) resolve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getState() != sockAdopted || len(s.fds) == 0 {
		return
	}
	p := s.p
	acc := s.acc
	fd := s.fds[0]
	fields := logrus.Fields{"local": acc.local, "remote": acc.remote}
	plain := func(r rendezvous.Reason, why error) {
		s.acc = nil
		p.fallback(r, fd, fields, why)
		s.fallBackLocked()
	}
	if r, ok := p.shmAllowed(); !ok {
		plain(r, nil)
		return
	}
	node, err := p.rendezvousNode()
	if err != nil {
		plain(rendezvous.ReasonOf(err), err)
		return
	}
	var rec rendezvous.Record
	if acc.rec != nil {
		rec = *acc.rec // looked up at the accept, an instant ago
	} else if rec, err = node.FindDeferred(acc.local, acc.remote); err != nil {
		plain(rendezvous.ReasonOf(err), err)
		return
	}
	key := rendezvous.Tuple{Client: acc.remote, Server: acc.local}.Canon()
	p.mu.Lock()
	p.pulling[key] = fd // for the offer's early bytes (handleOffer)
	p.mu.Unlock()
	m, err := node.Pull(rec, acc.local, acc.remote, time.Now().Add(rendezvous.PullWait))
	p.mu.Lock()
	delete(p.pulling, key)
	p.mu.Unlock()
	if err != nil {
		plain(rendezvous.ReasonOf(err), err)
		return
	}
	pr, _ := m.Prepared.(*prepared)
	if pr == nil {
		plain(rendezvous.ReasonProtocol, errNoPrepared)
		return
	}
	if err := discardKernel(fd, pr.kernelEarly); err != nil {
		// Peeked a moment ago and read by nobody since (this lock): not
		// expected. The claim is made; the stream goes on, the connection
		// reset rather than a stream with bytes twice.
		p.log.WithError(err).Warn("deferred connection's early bytes: not taken off the kernel socket")
		pr.data().Abort()
	}
	s.acc = nil
	s.names = connNames{local: acc.local, peer: acc.remote}
	s.accelerateLocked(pr.end, pr.data())
	for _, f := range s.fds {
		p.host.SetFDState(f, FDManaged)
	}
	p.count("accept.pulled")
	fields["stream"] = pr.data().ID()
	p.log.WithFields(fields).Debug("deferred connection claimed: accelerated")
}

// pullingFD returns the kernel fd of the connection t that this process
// is pulling, if it is.
func (p *Process) pullingFD(t rendezvous.Tuple) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fd, ok := p.pulling[t.Canon()]
	return fd, ok
}

// earlyWait bounds the wait for a pulled connection's early bytes to be
// queued on the kernel socket (over loopback they are as the offer comes;
// through a veth pair they may still be in flight).
const earlyWait = 100 * time.Millisecond

var (
	errEarlyNotPulled = errors.New("offer of early kernel bytes for a connection this process is not pulling")
	errEarlyExtra     = errors.New("more bytes on the kernel socket than the offer says")
	errEarlyMissing   = errors.New("the offer's early bytes did not arrive on the kernel socket")
	errEarlyNoRoom    = errors.New("the offer's early bytes do not fit in its area")
)

// kernelHolds checks that the kernel socket fd of a pulled connection
// holds exactly the e bytes its connector's offer says it wrote there
// (offerMsg.early; 0 for an offer of the channel modes), waiting up to
// earlyWait for bytes still in flight.
func kernelHolds(fd, e int) error {
	deadline := time.Now().Add(earlyWait)
	for {
		n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		switch {
		case err != nil:
			return err
		case n > e:
			return errEarlyExtra
		case n == e:
			return nil
		case time.Now().After(deadline):
			return errEarlyMissing
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// publishKernelEarly copies the e bytes that the connector of the pulled
// connection fd wrote on the kernel socket before its offer
// (offerMsg.early) into ds's area, as the connector's first bytes, once
// the socket holds them and nothing more (kernelHolds; e may be 0). It
// runs before the verdict, which is what lets the connector send on the
// area, so they come before anything it sends there. The bytes stay on
// the kernel socket until the claim is made (discardKernel): a pull that
// fails after this leaves the connection plain with every byte.
func publishKernelEarly(fd int, ds *directStream, e int) error {
	if err := kernelHolds(fd, e); err != nil || e == 0 {
		return err
	}
	buf := make([]byte, e)
	if n, _, err := unix.Recvfrom(fd, buf, unix.MSG_PEEK|unix.MSG_DONTWAIT); err != nil || n != e {
		return errEarlyMissing
	}
	if ds.conn.PublishAsPeer(buf) != e {
		return errEarlyNoRoom
	}
	return nil
}

// discardKernel takes the n bytes publishKernelEarly left on the kernel
// socket fd off it, once the claim is made.
func discardKernel(fd, n int) error {
	var buf [4096]byte
	for n > 0 {
		k, _, err := unix.Recvfrom(fd, buf[:min(n, len(buf))], unix.MSG_DONTWAIT)
		switch {
		case k > 0:
			n -= k
		case err == unix.EINTR:
		case err == nil:
			return fmt.Errorf("early bytes: end of stream with %d left", n)
		default:
			return fmt.Errorf("early bytes: %w", err)
		}
	}
	return nil
}
