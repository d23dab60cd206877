package shim

import (
	"context"
	"net/netip"
	"time"
	"unsafe"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/shim/config"
)

// The connecting side. connect() to an address the rules allow and the
// rendezvous registry knows: bind (an ephemeral port, to learn the
// 4-tuple), offer (with a new channel's socket, or naming the channel to
// reuse), commit, then the real connect(); the socket becomes MANAGED in
// state connecting. The acceptor's verdict arrives when its accept()
// claims the connection: accepted makes the socket accelerated (its first
// data call, or poll, takes the stream), declined makes it plain TCP, with
// no byte lost since nothing went on the stream. Any failure before the
// commit falls back to a plain connect() with the reason counted; the
// program's connect() never fails because of the shim.

// pendingConnect is what a connecting socket waits for.
type pendingConnect struct {
	answer     *rendezvous.Answer
	direct     *directStream // the direct path: this side's area (no channel end)
	def        *deferral     // deferred (group listener): answer nil until pulled (deferred.go)
	end        *channelEnd
	id         uint32
	dst        netip.AddrPort
	kernelDone bool // the kernel connect completed (successfully)
	// A committed direct offer (offerDirectTo): its answer comes with the
	// verdict.
	unanswered bool
	unbound    bool         // its offer waits for the port connect() picks (Answer.Bound)
	post       *direct.Post // offered through the area's post (post.go); answer nil
	acceptor   string       // a committed direct offer's: the acceptor's rendezvous socket (areaPool.mapped)
	// A posted offer's receive that waits for the acceptor's first bytes
	// (post.go, settlePostLocked): its announced sleep, withdrawn at the
	// next settle, and whether one waited so already.
	dataSleep  *direct.Sleep
	dataWaited bool
}

// abandon gives the offer up: withdrawn and the rendezvous connection
// closed, the stream id handed back to its channel end.
func (pc *pendingConnect) abandon() {
	if pc.post != nil {
		// Unclaimed, it is withdrawn; claimed, the acceptor finds the
		// area reset.
		pc.endDataWait()
		withdrawPost(pc)
		pc.direct.abandon()
		return
	}
	pc.answer.Abort()
	if pc.direct != nil {
		pc.direct.abandon()
		return
	}
	pc.end.giveUp(pc.id)
}

// verdictTakeTimeout bounds the wait for an accepted stream's
// announcement (normally there already).
const verdictTakeTimeout = 2 * time.Second

// Connect is the connect hook. raw is the program's sockaddr. It returns
// Pass, 0, or -errno (-EINPROGRESS for a nonblocking socket).
//
// A nonblocking socket gets -EINPROGRESS at once: the offer, its commit
// and the kernel connect run in a goroutine (connectAsync) while the
// socket is connecting with an offer pending (pendingConnect.answer nil):
// neither readable nor writable, a second connect -EALREADY; the
// goroutine's end rings the socket's wakeup (its word and its sleepers' kicks), and the
// connection goes on as a blocking connect's would, or falls back to a
// plain kernel connect.
func (p *Process) Connect(fd int, raw []byte) int64 {
	s := p.lookup(fd)
	if s == nil {
		return Pass
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.getState() == sockConnecting && s.pend != nil && s.pend.answer == nil && s.pend.def == nil && s.pend.post == nil {
		return negErrno(unix.EALREADY) // the offer is still being made
	}
	// A deferred connection (deferred.go) made its kernel connect: the
	// kernel answers a second one (EISCONN once connected), as hiredis
	// asks to learn that its nonblocking connect completed.
	if s.getState() != sockCreated {
		return Pass // connecting again, listening, ...: the kernel answers
	}
	dst, family, ok := ParseSockaddr(raw)
	if !ok || (family != unix.AF_INET && family != unix.AF_INET6) {
		return Pass // AF_UNSPEC (disconnect) and the like
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	fields := logrus.Fields{"remote": dst}
	plain := func(r rendezvous.Reason, why error) int64 {
		p.fallback(r, fd, fields, why)
		s.fallBackLocked()
		return Pass
	}
	if r, ok := p.shmAllowed(); !ok {
		return plain(r, nil)
	}
	if !p.cfg.Eligible(dst.Addr(), dst.Port()) {
		return plain(rendezvous.ReasonExcluded, nil)
	}
	if p.cfg.ShortConn {
		now := nowNS()
		keep, probe := p.short.plain(dst, now)
		if keep {
			return plain(rendezvous.ReasonShortLived, nil)
		}
		s.setup = connSetup{dst: dst, began: now, probe: probe} // judged at close
	}
	node, err := p.rendezvousNode()
	if err != nil {
		return plain(rendezvous.ReasonOf(err), err)
	}
	entries, err := node.Lookup(dst)
	if err != nil {
		if rendezvous.ReasonOf(err) == rendezvous.ReasonNotShimmed && p.cfg.Services.Match(dst.Addr(), dst.Port()) {
			return s.connectServiceLocked(fd, node, dst, raw, fields) // crossns.go
		}
		return plain(rendezvous.ReasonOf(err), err)
	}
	entry := entries[0]
	for _, e := range entries {
		if !e.Group { // a process that answers for its own listener
			entry = e
			break
		}
	}
	var local netip.AddrPort
	switch {
	case entry.OtherNetns:
		// Another pod: a specific source address names this side of the
		// 4-tuple, since ports repeat across namespaces (crossns.go).
		local, err = bindSource(fd, s.family, dst)
	case p.cfg.Channel != config.ChannelDirect && !entry.Group:
		local, err = bindEphemeral(fd, s.family)
	default:
		// A committed direct offer, and a deferral's record, leave the
		// port to the kernel's connect(), as on kernel TCP, and name it
		// after (an unbound offer or record: core/rendezvous/unbound.go,
		// unboundrec.go), unless the program bound.
		local, err = sockName(fd)
	}
	if err != nil {
		return plain(rendezvous.ReasonUnsupportedOption, err)
	}
	tuple := rendezvous.Tuple{Client: local, Server: dst}
	if entry.Group {
		return s.connectDeferredLocked(fd, node, tuple, raw, fields, false)
	}
	entries[0] = entry
	if s.nonblock.Load() && p.cfg.Channel != config.ChannelDirect {
		// A channel's offer waits for its answer; a direct offer is
		// committed and waits for nothing (offerDirectTo).
		offering := &pendingConnect{dst: dst}
		s.pend = offering
		s.wake.init(p, p.words.get())
		s.setState(sockConnecting)
		for _, f := range s.fds {
			p.host.SetFDState(f, FDManaged)
		}
		go s.connectAsync(node, entries[0], tuple, offering, append([]byte(nil), raw...), fields)
		return negErrno(unix.EINPROGRESS)
	}
	pc, err := p.offer(node, entries[0], tuple, fd, !s.nonblock.Load())
	if err != nil {
		return plain(rendezvous.ReasonOf(err), err)
	}
	s.wake.init(p, p.words.get())
	errno, made := s.connectOfferedLocked(fd, pc, dst, raw, fields)
	if !made {
		return Pass // the commit failed: a plain connect
	}
	return negErrno(errno)
}

// connectOfferedLocked commits the offer pc and makes the real connect on
// fd, as the program asked for it; the socket is connecting after it.
// It returns the kernel's errno (0, EINPROGRESS, or a failure, after which
// the socket is plain TCP) and made true; when the commit fails the
// socket is plain TCP, not connected yet, and made is false. An unbound
// offer's port goes to the acceptor right after the connect; when it
// cannot, the connection is plain.
//
// +checklocks:s.mu
func (s *Socket) connectOfferedLocked(fd int, pc *pendingConnect, dst netip.AddrPort, raw []byte, fields logrus.Fields) (errno unix.Errno, made bool) {
	p := s.p
	fields["stream"] = pc.id
	giveUp := func(err error) {
		pc.abandon()
		p.fallback(rendezvous.ReasonOf(err), fd, fields, err)
		s.fallBackLocked()
	}
	if pc.post == nil {
		if err := pc.answer.Commit(); err != nil {
			giveUp(err)
			return 0, false
		}
	}
	pc.dst = dst
	_, _, errno = unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)))
	switch errno {
	case 0:
		pc.kernelDone = true
	case unix.EINPROGRESS:
	default:
		// Refused, unreachable, interrupted...: the kernel's answer, and
		// the stream is given up (the acceptor's offer expires).
		pc.abandon()
		p.count("connect.failed")
		s.fallBackLocked()
		return errno, true
	}
	var err error
	s.names.peer, _, _ = ParseSockaddr(raw) // as getpeername names it (a mapped address stays mapped)
	if pc.post != nil {
		var local netip.AddrPort
		if local, err = sockName(fd); err == nil {
			s.names.local = local
			if pc.unbound && !pc.post.Bind(local) {
				err = errDeclined
			}
		}
	} else if pc.unbound {
		var local netip.AddrPort
		if local, err = sockName(fd); err == nil {
			s.names.local = local
			err = pc.answer.Bound(local)
		}
	}
	if err != nil {
		giveUp(err)
		return errno, true
	}
	s.pend = pc
	s.setState(sockConnecting)
	for _, f := range s.fds {
		p.host.SetFDState(f, FDManaged)
	}
	// Early bytes go into the offer's area before this side has the
	// acceptor's bells (they come with the verdict): a sleeper they
	// must wake is rung on the socket.
	s.ringLocked()
	if p.log.IsLevelEnabled(logrus.DebugLevel) { // WithFields allocates even when nothing is logged
		p.log.WithFields(fields).Debug("connecting accelerated, verdict pending")
	}
	return errno, true
}

// connectAsync makes the offer of a nonblocking connect (offering is the
// placeholder in s.pend meanwhile), then the real connect, or a plain one
// when the offer failed. A socket closed meanwhile only gives the offer up.
func (s *Socket) connectAsync(node *rendezvous.Node, e rendezvous.Entry, t rendezvous.Tuple, offering *pendingConnect, raw []byte, fields logrus.Fields) {
	p := s.p
	pc, err := p.offer(node, e, t, -1, false)
	s.mu.Lock()
	if s.getState() != sockConnecting || s.pend != offering || len(s.fds) == 0 {
		s.mu.Unlock()
		if pc != nil {
			pc.abandon()
		}
		return
	}
	fd := s.fds[0]
	if err == nil {
		// A failed connect falls back (the program reads the failure from
		// the kernel socket, as it would have; fallBackLocked wakes).
		if s.connectOfferedLocked(fd, pc, offering.dst, raw, fields); s.wake.word != nil {
			s.wake.wakeEverything()
		}
		s.mu.Unlock()
		return
	}
	p.fallback(rendezvous.ReasonOf(err), fd, fields, err)
	unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)))
	s.pend = nil
	s.fallBackLocked()
	s.mu.Unlock()
}

// bindEphemeral binds an unbound socket to an ephemeral port of the
// wildcard address (the kernel picks the source address at connect) and
// returns the local address.
func bindEphemeral(fd, family int) (netip.AddrPort, error) {
	local, err := sockName(fd)
	if err != nil {
		return local, err
	}
	if local.Port() != 0 {
		return local, nil
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{}
	if family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return local, err
	}
	return sockName(fd)
}

// offer runs the rendezvous with the listener process e: over the
// channel to it when one exists, else with a new channel set up over a
// socketpair whose other end travels in the offer. A direct offer is
// committed when the caller connects the socket fd right after it (see
// offerDirectTo); fd -1: the offer waits for its answer. blocking: fd
// is a blocking socket, whose offer may be posted (post.go).
func (p *Process) offer(node *rendezvous.Node, e rendezvous.Entry, t rendezvous.Tuple, fd int, blocking bool) (*pendingConnect, error) {
	peer := procID{pid: e.PID, start: e.Start}
	if p.cfg.Channel == config.ChannelDirect {
		var send func(*directStream, rendezvous.Payload) (*rendezvous.Answer, error)
		if fd >= 0 {
			send = func(_ *directStream, pl rendezvous.Payload) (*rendezvous.Answer, error) {
				return node.OfferCommitted(e, t, pl, fd)
			}
		}
		postFD := fd
		if !blocking || e.OtherNetns {
			// A nonblocking connect's readiness goes through the
			// rendezvous connection; another namespace's addresses
			// differ (crossns.go): no post.
			postFD = -1
		}
		return p.offerDirectTo(node, e, t, 0, send, postFD)
	}
	shared := p.cfg.Channel == config.ChannelShared
	if shared {
		if end := p.chans.forPeer(peer); end != nil {
			return p.offerOn(node, e, t, end, nil)
		}
		m := p.chans.dialLock(peer)
		m.Lock()
		defer m.Unlock()
		if end := p.chans.forPeer(peer); end != nil {
			return p.offerOn(node, e, t, end, nil)
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: err}
	}
	type result struct {
		ch  *mux.Channel
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := p.establish(pair[0], peer.pid, time.Now().Add(offerTimeout))
		done <- result{ch, err}
	}()
	end := &channelEnd{token: newToken(), dialer: true, peer: peer}
	pc, oerr := p.offerOn(node, e, t, end, &pair[1])
	unix.Close(pair[1])
	if oerr != nil {
		unix.Shutdown(pair[0], unix.SHUT_RDWR) // ends our side's setup at once
	}
	r := <-done
	unix.Close(pair[0])
	if oerr != nil {
		if r.ch != nil {
			r.ch.Close()
		}
		return nil, oerr
	}
	if r.err != nil {
		pc.answer.Abort()
		return nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: r.err}
	}
	end.ch = r.ch
	if shared {
		p.chans.add(end)
	}
	return pc, nil
}

// offerDirectTo runs the rendezvous for a direct connection: the offer
// carries the new area. send sends a committed offer's payload, the area
// of ds (to the listener's server, or on a PULL's connection); nil: the
// offer is not committed, and waits for its answer. A committed offer
// (the caller connects at once) waits for no answer: the acceptor answers
// when its accept() claims the connection, and the answer, which is the
// verdict, finishes this side (settleLocked, directStream.answered).
// Writes made meanwhile go into the area (early.go), so the round trip of
// an answer before the connect is gone from every connection's setup. A
// deferred connection's offer, made while a puller waits (deferred.go),
// is committed too, and goes on the PULL's own connection; early is what
// it wrote on the kernel socket before (offerMsg.early; 0 otherwise).
//
// fd is the connector's socket when the offer may be posted instead
// (post.go, offerPost), else -1.
func (p *Process) offerDirectTo(node *rendezvous.Node, e rendezvous.Entry, t rendezvous.Tuple, early uint32, send func(*directStream, rendezvous.Payload) (*rendezvous.Answer, error), fd int) (*pendingConnect, error) {
	ds, files, bells, err := p.offerDirect(procID{pid: e.PID, start: e.Start})
	if err != nil {
		return nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonRefused, Err: err}
	}
	if send != nil && fd >= 0 {
		if pc := p.offerPost(ds, t, fd, bells, e.Socket); pc != nil {
			return pc, nil
		}
	}
	msg := offerMsg{direct: true, from: p.self, bells: bells, held: heldBells(ds.peer), token: ds.slotToken(), early: early}
	pl := rendezvous.Payload{Data: msg.encode(), Files: files}
	if send != nil {
		a, err := send(ds, pl)
		if err != nil {
			ds.abandon()
			return nil, err
		}
		ds.sent()
		return &pendingConnect{answer: a, direct: ds, id: 1, unanswered: true, unbound: t.Client.Port() == 0, acceptor: e.Socket}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), offerTimeout)
	defer cancel()
	a, err := node.Offer(ctx, e, t, pl)
	if err != nil {
		ds.abandon()
		return nil, err
	}
	ds.sent()
	err = ds.answered(a.Payload)
	a.Payload.CloseFiles()
	if err != nil {
		a.Abort()
		ds.abandon()
		return nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: err}
	}
	return &pendingConnect{answer: a, direct: ds, id: 1}, nil
}

// offerOn sends the offer: for end's channel, or (sock != nil) for a new
// one set up over *sock.
func (p *Process) offerOn(node *rendezvous.Node, e rendezvous.Entry, t rendezvous.Tuple, end *channelEnd, sock *int) (*pendingConnect, error) {
	msg := offerMsg{newChannel: sock != nil, dialer: end.dialer, token: end.token, from: p.self}
	pl := rendezvous.Payload{Data: msg.encode()}
	if sock != nil {
		pl.Files = []int{*sock}
	}
	ctx, cancel := context.WithTimeout(context.Background(), offerTimeout)
	defer cancel()
	a, err := node.Offer(ctx, e, t, pl)
	if err != nil {
		return nil, err
	}
	a.Payload.CloseFiles()
	ans, err := decodeAnswer(a.Payload.Data)
	if err != nil {
		a.Abort()
		return nil, &rendezvous.FallbackError{Reason: rendezvous.ReasonProtocol, Err: err}
	}
	return &pendingConnect{answer: a, end: end, id: ans.id}, nil
}
