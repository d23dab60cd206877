package shim

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/random"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/shim/config"
)

// The listening side: listen() registers the socket's address with the
// rendezvous node; the node's Handler answers connectors (setting up or
// reusing the channel and opening the stream); accept() claims the
// connection by its 4-tuple and gets the stream, or leaves it plain TCP.

// setupTimeout bounds a new channel's setup in the Handler, and
// offerTimeout the connector's wait for the answer (which includes it).
const (
	setupTimeout = 900 * time.Millisecond
	offerTimeout = time.Second
)

// SocketCreated is the socket hook: a TCP socket fd was created.
func (p *Process) SocketCreated(fd, domain, typ int) FDState {
	p.newSocket(fd, domain, typ&unix.SOCK_NONBLOCK != 0)
	return FDCandidate
}

// shmAllowed reports whether same-host acceleration is configured, and
// the reason when it is not.
func (p *Process) shmAllowed() (rendezvous.Reason, bool) {
	switch p.cfg.Provider {
	case config.ProviderAuto, config.ProviderSHM:
		return rendezvous.ReasonNone, true
	}
	return rendezvous.ReasonNoDevice, false
}

// Listen is the listen hook: the kernel listen(), then the registration.
func (p *Process) Listen(fd, backlog int) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return neg(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getState() == sockListening {
		return 0 // a new backlog, same registration
	}
	s.setState(sockListening)
	p.registerLocked(s, fd, false)
	return 0
}

// registerLocked registers the listener s (fd) with the rendezvous node,
// as a group listener when group (deferred.go: one a fork child adopted),
// or notes in s.unlisted why it is not registered.
//
// +checklocks:s.mu
func (p *Process) registerLocked(s *Socket, fd int, group bool) {
	if r, ok := p.shmAllowed(); !ok {
		s.unlisted = r
		return
	}
	addr, err := sockName(fd)
	if err != nil {
		s.unlisted = rendezvous.ReasonUnsupportedOption
		return
	}
	if !p.cfg.Eligible(addr.Addr(), addr.Port()) {
		p.log.WithField("listen", addr).Debug("listener excluded by rule: not registered")
		s.unlisted = rendezvous.ReasonExcluded
		return
	}
	node, err := p.rendezvousNode()
	if err != nil {
		s.unlisted = rendezvous.ReasonOf(err)
		return
	}
	register := node.Register
	if group {
		register = node.RegisterGroup // group from its first write: no connector offers to it alone
	}
	if err := register(addr); err != nil {
		p.log.WithError(err).WithField("listen", addr).Warn("cannot register listener; its connections stay on kernel TCP")
		s.unlisted = rendezvous.ReasonOf(err)
		return
	}
	if node.IsGroup(addr) {
		group = true // a listener on a port already shared with fork children
	}
	s.listenAddr, s.registered, s.group = addr, true, group
	p.markListenerLocked(s, fd)
	p.mu.Lock()
	p.listeners[s] = struct{}{}
	if !group {
		// A listener of its own (not one it shares with its parent, as
		// a worker does): a server, whose children will want a core.
		p.forkReady()
		p.ungrouped++
		p.forkWorkLocked()
	}
	p.mu.Unlock()
	p.log.WithFields(logrus.Fields{"listen": addr, "group": group}).Debug("listener registered")
}

// registeredListeners returns the registered listeners, for a caller that
// then takes each one's lock (p.mu is not held meanwhile).
func (p *Process) registeredListeners() []*Socket {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.listeners))
}

// unregisterLocked withdraws s's registration.
//
// +checklocks:s.mu
func (s *Socket) unregisterLocked() {
	if !s.registered {
		return
	}
	s.registered = false
	p := s.p
	p.unmarkListenerLocked(s)
	p.mu.Lock()
	delete(p.listeners, s)
	if !s.group {
		p.ungrouped--
		p.forkWorkLocked()
	}
	node := p.node
	p.mu.Unlock()
	if s.group {
		// Fork children may still accept on it (a pre-fork master closes
		// its copy after forking its workers): the group entry stays
		// until this process exits, so that connectors keep deferring. A
		// connector to a listener closed everywhere fails its connect.
		return
	}
	if node != nil {
		node.Unregister(s.listenAddr)
	}
}

// prepared is what the Handler keeps with a pending offer: the stream it
// opened for the connection.
type prepared struct {
	end    *channelEnd
	stream *mux.Stream
	direct *directStream // the direct path: this side of the area (end, stream nil)
	// kernelEarly: a pulled connection's early bytes, in the area now and
	// still on the kernel socket, which the claim takes off it (resolve).
	kernelEarly int
}

// data returns the stream that carries the connection.
func (pr *prepared) data() dataStream {
	if pr.direct != nil {
		return pr.direct
	}
	return pr.stream
}

// release gives a prepared connection up.
func (pr *prepared) release() {
	if pr.direct != nil {
		pr.direct.abandon()
		return
	}
	pr.stream.Close()
}

// handleOffer is the rendezvous Handler: it answers a connector with the
// id of a stream opened on the channel to the connector's process, set up
// now over the socket the offer carries, or reused.
func (p *Process) handleOffer(req rendezvous.Request) (rendezvous.Payload, any, error) {
	files := req.Payload.Files
	defer func() {
		for _, fd := range files {
			unix.Close(fd)
		}
	}()
	o, err := decodeOffer(req.Payload.Data)
	wantFiles := 0
	switch {
	case o.direct:
		wantFiles = 1 + bits.OnesCount64(o.bells) // the area, the connector's bells
	case o.newChannel:
		wantFiles = 1
	}
	if err != nil || len(files) != wantFiles {
		return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: errBadOffer}
	}
	if r, ok := p.shmAllowed(); !ok {
		return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: r, Err: errors.New("shared memory not allowed here")}
	}
	// A pulled connection: what its kernel socket holds must be what the
	// connector says it wrote there before the pull (deferred_accept.go).
	pulledFD, pulled := p.pullingFD(req.Tuple)
	if o.early > 0 && (!pulled || !o.direct) {
		return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: errEarlyNotPulled}
	}
	if pulled && !o.direct {
		if err := kernelHolds(pulledFD, 0); err != nil {
			return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: err}
		}
	}
	if o.direct {
		ds, ans, answerFiles, err := p.acceptDirect(o, files)
		if err != nil {
			p.log.WithError(err).Debug("direct area refused")
			return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: err}
		}
		if pulled {
			// The connector's writes before the pull go into the area
			// now, before the verdict lets it send there; they leave the
			// kernel socket once the claim is made (resolve).
			if err := publishKernelEarly(pulledFD, ds, int(o.early)); err != nil {
				ds.abandon() // the bells noted as given: the next offer's held mask heals that
				p.log.WithError(err).Warn("deferred connection's early bytes: offer refused")
				return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: err}
			}
		}
		// The accepted socket's buffer, before the connector can write.
		ds.SetRcvBuf(p.listenerRcvBuf(req.Tuple.Server))
		return rendezvous.Payload{Data: ans.encode(), Files: answerFiles}, &prepared{direct: ds, kernelEarly: int(o.early)}, nil
	}
	var e *channelEnd
	if o.newChannel {
		ch, err := p.establish(files[0], o.from.pid, time.Now().Add(setupTimeout))
		if err != nil {
			p.log.WithError(err).Debug("channel setup failed")
			return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: err}
		}
		e = &channelEnd{ch: ch, token: o.token, dialer: false, peer: o.from}
		if p.cfg.Channel == config.ChannelShared {
			p.chans.add(e)
		}
	} else if e = p.chans.byOffer(o.token, o.dialer); e == nil {
		return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: errors.New("unknown channel")}
	}
	st, err := e.ch.OpenRcvBuf(p.listenerRcvBuf(req.Tuple.Server))
	if err != nil {
		return rendezvous.Payload{}, nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: fmt.Errorf("open stream: %w", err)}
	}
	return rendezvous.Payload{Data: answerMsg{id: st.ID(), start: p.self.start}.encode()}, &prepared{end: e, stream: st}, nil
}

// onDrop releases the stream of an offer nobody claimed.
func (p *Process) onDrop(m rendezvous.Match, cause rendezvous.DropCause) {
	if pr, ok := m.Prepared.(*prepared); ok && pr != nil {
		pr.release()
	}
	p.count("offer.dropped." + cause.String())
}

// Accept is the accept hook: fd was accepted on listener lfd from peer.
func (p *Process) Accept(lfd, fd int, peer netip.AddrPort, flags int) FDState {
	ls := p.lookup(lfd) // a fork child adopts its inherited listener
	if ls == nil {
		return FDUnmanaged
	}
	ls.mu.Lock()
	registered, unlisted, group := ls.registered, ls.unlisted, ls.group
	ls.mu.Unlock()
	if !registered {
		if unlisted != rendezvous.ReasonNone {
			p.fallback(unlisted, fd, logrus.Fields{"remote": peer}, nil)
		}
		return FDUnmanaged
	}
	p.mu.Lock()
	node := p.node
	p.mu.Unlock()
	local, err := sockName(fd)
	if node == nil || err != nil {
		return FDUnmanaged
	}
	var m rendezvous.Match
	why := rendezvous.ReasonNone
	pr := p.claimPost(local, peer)
	if pr == nil {
		m, why = node.Claim(local, peer)
	}
	if why != rendezvous.ReasonNone && (group || node.HasNATRecord(peer)) {
		// Shared with fork children, or a connector behind a NAT
		// (crossns.go): the first process to use the connection
		// claims it (deferred_accept.go).
		return p.acceptDeferred(node, ls, fd, local, peer, flags)
	}
	if why != rendezvous.ReasonNone {
		p.fallback(why, fd, logrus.Fields{"local": local, "remote": peer}, nil)
		p.notOffered(node)
		return FDUnmanaged
	}
	if pr == nil {
		pr, _ = m.Prepared.(*prepared)
	}
	if pr == nil {
		return FDUnmanaged
	}
	s := &Socket{p: p, family: ls.family, fds: []int{fd}}
	s.inheritBuffers(ls)
	s.nonblock.Store(flags&unix.SOCK_NONBLOCK != 0)
	s.mu.Lock()
	s.names = connNames{local: local, peer: peer}
	s.accelerateLocked(pr.end, pr.data())
	s.mu.Unlock()
	p.fds.set(fd, &fdEntry{sock: s})
	if p.log.IsLevelEnabled(logrus.DebugLevel) {
		p.log.WithFields(logrus.Fields{"local": local, "remote": peer, "stream": pr.data().ID()}).Debug("accepted accelerated")
	}
	return FDManaged
}

// AcceptNoFD follows a program's accept() that failed for want of an fd:
// the offers waiting for their accept give their fds back (rendezvous
// Node.ReleaseForAccept); it returns how many.
func (p *Process) AcceptNoFD() int {
	p.mu.Lock()
	node := p.node
	p.mu.Unlock()
	if node == nil {
		return 0
	}
	n := node.ReleaseForAccept()
	if n > 0 {
		p.count("accept.fds_released")
	}
	return n
}

// newToken draws a channel token.
// tokenSeq numbers the tokens drawn without a random source.
var tokenSeq atomic.Uint64

func newToken() uint64 {
	v, err := random.Uint64()
	if err != nil {
		// Still unique on this host: the acceptor's table holds tokens
		// of many connectors.
		v = uint64(unix.Getpid())<<32 | tokenSeq.Add(1)<<1
	}
	return v | 1
}
