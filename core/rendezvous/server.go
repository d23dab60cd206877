package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/wait"
)

// server is a Node's rendezvous socket and the goroutines serving it: one
// accept loop, and one goroutine per connection (at most MaxConns, and at
// most half of them from one peer process: peerShare), each bounded by
// ReadTimeout plus the Handler's time.
//
// Every accept of the listening socket is made under intakeMu, and the
// connections whose request has not arrived yet wait in waiting, looked
// at again under intakeMu, instead of on goroutines of their own. So a
// Claim that finds no offer for its connection and then takes the
// socket's backlog and waiting connections itself (intake) has seen
// every committed offer sent before the connector's connect(): filed, or
// served by it.
type server struct {
	n       *Node
	fd      int          // listening socket, nonblocking
	park    *wait.ParkFD // fd in the Go runtime's poller: the accept loop's idle wait
	path    string
	closing atomic.Bool
	active  atomic.Int32 // connections being served
	peers   peerCounts   // the same, per peer process
	loop    sync.WaitGroup
	conns   sync.WaitGroup

	intakeMu sync.Mutex
	waiting  []waitingConn // +checklocks:intakeMu
	// pulls are the whole PULLs an intake took (Config.PullHere), served
	// once it let the lock go (servePulls).
	pulls []takenPull // +checklocks:intakeMu
}

// takenPull is a connection whose whole PULL a look saw (seen).
type takenPull struct {
	w    waitingConn
	seen []byte
}

// waitingConn is an accepted rendezvous connection whose request has not
// arrived whole yet.
type waitingConn struct {
	fd    int
	cred  *unix.Ucred
	peer  peerKey
	until time.Time // ReadTimeout after its accept
}

// startServer binds <rundir>/p<pid>-<random>.sock (mode 0600) and starts
// serving it. Called with n.mu held.
func startServer(n *Node) (*server, error) {
	var srv *server
	err := n.withRunDir(true, func(dirfd int) error {
		n.sweep(dirfd)
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return err
		}
		fdhook.NoteFDs(fd) // long-lived: kept from the host (fdhook.FDHook)
		// The socket inode's mode becomes the file's mode at bind (less
		// the umask), so no moment exists where others may connect. The
		// group may: in a shared run directory (rundir.go) its members are
		// the uids that may reach this process; in a private one nobody
		// else enters. SO_PEERCRED decides either way.
		_, sockMode := modes(dirfd)
		unix.Fchmod(fd, sockMode)
		for try := 0; ; try++ {
			path := filepath.Join(n.cfg.RunDir, sockName(n.pid, random32()))
			err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
			if err == unix.EADDRINUSE && try < 8 {
				continue
			}
			if err == nil {
				srv = &server{n: n, fd: fd, path: path}
			}
			break
		}
		if err == nil {
			if err = unix.Chmod(srv.path, sockMode); err == nil {
				err = unix.Listen(fd, 128)
			}
			if err != nil {
				unix.Unlink(srv.path)
			}
		}
		if err != nil {
			fdhook.CloseFD(fd)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fallback(ReasonRunDir, fmt.Errorf("rendezvous server: %w", err))
	}
	srv.park = wait.NewParkFD(srv.fd, pending)
	srv.loop.Add(1)
	go srv.acceptLoop()
	return srv, nil
}

// stop closes the socket and waits for the accept loop and every
// connection goroutine.
func (s *server) stop() {
	s.closing.Store(true)
	// shutdown wakes the loop's poll (and the accept after it returns
	// EINVAL); the fd stays valid until the loop has returned.
	unix.Shutdown(s.fd, unix.SHUT_RDWR)
	s.loop.Wait()
	s.park.Close()
	unix.Unlink(s.path)
	s.conns.Wait()
}

func (s *server) acceptLoop() {
	defer s.loop.Done()
	for !s.closing.Load() {
		s.intakeMu.Lock()
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
		ms := -1
		for _, w := range s.waiting {
			pfd = append(pfd, unix.PollFd{Fd: int32(w.fd), Events: unix.POLLIN})
			left := int(time.Until(w.until)/time.Millisecond) + 1
			if ms < 0 || left < ms {
				ms = max(left, 0)
			}
		}
		s.intakeMu.Unlock()
		var err error
		if len(pfd) == 1 {
			// Nothing waits but the socket: parked in the runtime's
			// poller, not blocked in poll(2), whose P sysmon takes after
			// 20 us and hands to a thread it wakes (wait.ParkFD).
			err = s.park.Wait(time.Time{})
		} else {
			// A waiting connection that a Claim served meanwhile may have
			// left its number to another file here: one early return at
			// most, since the next round polls the list as it is then.
			_, err = unix.Poll(pfd, ms)
			if err == unix.EINTR {
				err = nil
			}
		}
		if err != nil && !s.closing.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		s.servePulls(s.takeAll(), true)
	}
	s.intakeMu.Lock()
	for _, w := range s.waiting {
		unix.Close(w.fd)
		s.served(w.peer)
	}
	s.waiting = nil
	s.intakeMu.Unlock()
}

// intakeTries is how many times intake tries the lock, yielding between
// tries, before it blocks: about 40 us when the holder runs on another
// core.
const intakeTries = 64

// pending reports whether the listening socket fd has a connection to
// accept, or has been shut down (stop): the park's readiness.
func pending(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, _ := unix.Poll(pfd, 0)
	return n > 0
}

// intake serves what the rendezvous socket holds now: the requests that
// arrived on waiting connections, then its backlog. Claim calls it when
// it found no offer; a PULL it takes goes on a goroutine of its own (the
// program's thread serves no other connection's PULL).
func (s *server) intake() { s.servePulls(s.takeAll(), false) }

// takeAll takes the requests of the waiting connections and the backlog
// under the intake's lock, and returns the whole PULLs among them, which
// its caller serves once the lock is let go (servePulls).
func (s *server) takeAll() []takenPull {
	// The accept loop holds the lock while it reads a request, often the
	// very offer a Claim comes for: the Claim's thread waits for it
	// without parking (wait.LockYielding).
	wait.LockYielding(&s.intakeMu, intakeTries)
	defer s.intakeMu.Unlock()
	waiting := s.waiting
	s.waiting = nil
	for _, w := range waiting {
		s.take(w)
	}
	s.acceptAllLocked()
	pulls := s.pulls
	s.pulls = nil
	return pulls
}

// servePulls serves the PULLs an intake took, outside its lock; onLoop:
// the last one on this goroutine, the accept loop's (the others on
// goroutines of their own, so that none waits for more than one other's
// serve). A goroutine per PULL woke a thread (the runtime's spinning M)
// on the critical path of every deferred connection. The loop accepts
// nothing while it serves, so only a handler that offers on the PULL's
// own connection is run there (Config.PullHere): one that offered to the
// puller's server would wait for that server's loop, which may be this
// one (a process that pulls from itself) or one serving a PULL from here.
func (s *server) servePulls(pulls []takenPull, onLoop bool) {
	for i, q := range pulls {
		if onLoop && i == len(pulls)-1 {
			s.serve(q.w.fd, q.w.cred, q.w.peer, q.seen)
		} else {
			go s.serve(q.w.fd, q.w.cred, q.w.peer, q.seen)
		}
	}
}

// acceptAllLocked accepts until the backlog is empty and takes each
// connection. s.intakeMu held.
func (s *server) acceptAllLocked() {
	s.n.inflight(1) // before a connection leaves the backlog (held.go)
	defer s.n.inflight(-1)
	for !s.closing.Load() {
		fd, _, err := unix.Accept4(s.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		if s.closing.Load() {
			if err == nil {
				unix.Close(fd)
			}
			return
		}
		switch {
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case err == unix.EAGAIN:
			return
		case err == unix.EMFILE || err == unix.ENFILE:
			// The process is at its fd limit (the kernel says so before
			// it looks at the backlog): the connector hears so at once,
			// and its connection stays on kernel TCP.
			took := false
			if fdhook.AtLimit(func() { took = s.refuseAtLimit() }) && !took {
				return // the backlog is empty
			}
			if took {
				continue
			}
			time.Sleep(10 * time.Millisecond) // no spare fd: the connection waits in the backlog
			return
		case err != nil:
			// Out of memory, or no spare fd: the connection waits in the
			// backlog; back off instead of spinning on the same failure.
			time.Sleep(10 * time.Millisecond)
			return
		}
		s.n.stats.conns.Add(1)
		cred, err := peerCred(fd)
		if err != nil {
			unix.Close(fd)
			continue
		}
		if int(s.active.Add(1)) > s.n.cfg.MaxConns {
			s.active.Add(-1)
			s.n.stats.overloaded.Add(1)
			unix.Close(fd)
			continue
		}
		peer := peerOf(cred)
		if !s.peers.add(peer, peerShare(s.n.cfg.MaxConns)) {
			// One process holds its share already: it is refused, and
			// every other process still gets in.
			s.active.Add(-1)
			s.n.stats.peerLimited.Add(1)
			s.refuse(fd, ReasonRefused, errPeerShare.Error())
			continue
		}
		s.conns.Add(1)
		s.n.inflight(1) // until served
		s.take(waitingConn{fd: fd, cred: cred, peer: peer, until: time.Now().Add(s.n.cfg.ReadTimeout)})
	}
}

// take serves a connection whose whole offer is queued on this goroutine
// (the usual case: the connector sends it right after its connect),
// a whole PULL after the intake (s.pulls, Config.PullHere), other
// requests on a goroutine of their own, and keeps it waiting while its
// request has not arrived, until ReadTimeout. s.intakeMu held.
func (s *server) take(w waitingConn) {
	var buf [peekLen]byte
	switch what, seen := queued(w.fd, &buf); what {
	case queuedOffer, queuedEnd:
		s.serve(w.fd, w.cred, w.peer, seen) // an end: closed at once
	case queuedPull:
		if s.n.cfg.PullHere {
			s.pulls = append(s.pulls, takenPull{w: w, seen: append([]byte(nil), seen...)})
		} else {
			go s.serve(w.fd, w.cred, w.peer, seen)
		}
	case queuedOther:
		go s.serve(w.fd, w.cred, w.peer, nil)
	default:
		if time.Now().Before(w.until) {
			s.waiting = append(s.waiting, w)
			return
		}
		s.n.stats.readTimeouts.Add(1)
		unix.Close(w.fd)
		s.served(w.peer)
	}
}

// served releases a connection's share of the server's limits.
func (s *server) served(peer peerKey) {
	s.peers.remove(peer)
	s.active.Add(-1)
	s.n.inflight(-1)
	s.conns.Done()
}

// What a rendezvous connection's queued bytes show.
const (
	queuedNothing = iota // nothing yet
	queuedOffer          // a whole offer (or committed offer)
	queuedPull           // a whole PULL
	queuedOther          // another request, a large one, or part of one (a sender sends its frame in one call)
	queuedEnd            // the connection's end before a byte (a liveness probe) or an error
)

// queued looks at fd's queued bytes without taking them. Only a whole
// small offer is served under the intake's lock, so that serving it
// cannot wait on the peer (a peer that sends half a frame and stops
// would hold the intake until ReadTimeout). A pull's handler makes an
// offer itself, maybe to this very process: a whole pull is served after
// the lock is let go (servePulls) when the handler offers on the PULL's
// own connection (Config.PullHere), else on a goroutine of its own.
// It returns what it saw, seen: the whole offer or pull when queuedOffer
// or queuedPull.
func queued(fd int, buf *[peekLen]byte) (what int, seen []byte) {
	b, ok, eof := peekFrame(fd, buf)
	switch {
	case eof:
		return queuedEnd, nil
	case !ok:
		return queuedNothing, nil
	case len(b) < 4+headerLen:
		return queuedOther, nil
	}
	want := 4 + int(binary.LittleEndian.Uint32(b[:4]))
	k := kind(b[4+5])
	switch {
	case (k == kindOffer || k == kindOfferCommitted) && want <= len(b):
		return queuedOffer, b
	case k == kindPull && want <= len(b):
		return queuedPull, b
	}
	return queuedOther, nil
}

// serve handles one rendezvous connection from cred (peer is its key):
// one request, the Handler, the answer. On success the fd passes to the
// pending entry, which closes it; otherwise it is closed here.
// seen is what a look at the connection saw of its request (queued),
// or nil.
func (s *server) serve(fd int, cred *unix.Ucred, peer peerKey, seen []byte) {
	defer s.served(peer)
	n := s.n
	deadline := time.Now().Add(n.cfg.ReadTimeout)
	if !n.allowed(cred.Uid) {
		n.stats.uidRejected.Add(1)
		s.refuse(fd, ReasonRefused, ErrUIDNotAllowed.Error())
		return
	}
	body, files, err := recvFrame(fd, seen, deadline)
	var req Request
	if err == nil {
		var m message
		if m, err = decodeMessage(body); err == nil && m.kind == kindPull {
			s.servePull(fd, m, files, cred)
			return
		}
		req, err = requestOf(m, files, err)
	}
	if err != nil {
		if errors.Is(err, errTimeout) || errors.Is(err, errClosedIdle) {
			if errors.Is(err, errTimeout) {
				n.stats.readTimeouts.Add(1)
			}
			unix.Close(fd) // a timeout, or a liveness probe (probeSocket)
			return
		}
		n.stats.badRequests.Add(1)
		s.refuse(fd, ReasonProtocol, err.Error())
		return
	}
	req.Cred = *cred
	s.serveOffer(fd, req)
}

// serveOffer handles the offer req that came on fd (a connection to the
// server, or the PULL's own: PullRequest.OfferHere): the Handler, then
// the pending entry (a committed offer) or the answer. On success the fd
// passes to the pending entry, which closes it; otherwise the offer is
// refused on it and it is closed.
func (s *server) serveOffer(fd int, req Request) {
	n := s.n
	expected, gone := n.pend.admit(req.Tuple.canon())
	if gone {
		closeFiles(req.Payload.Files)
		s.refuse(fd, ReasonTimeout, "the pull of "+req.Tuple.String()+" ended")
		return
	}
	if !expected && !n.listening(req.Tuple.Server) {
		closeFiles(req.Payload.Files)
		s.refuse(fd, ReasonNotShimmed, "no listener on "+req.Tuple.Server.String())
		return
	}
	answer, prepared, err := s.callHandler(req)
	if err != nil {
		r := ReasonRefused
		var fe *FallbackError
		if errors.As(err, &fe) && fe.Reason != ReasonNone && fe.Reason.Valid() {
			r = fe.Reason
		}
		s.refuse(fd, r, err.Error())
		return
	}
	req.Payload.Files = nil
	match := Match{Request: req, Prepared: prepared}
	if !answer.fits() {
		n.pend.dropped(match, DropUndelivered)
		s.refuse(fd, ReasonProtocol, "answer too large")
		return
	}
	if req.committed {
		s.file(fd, match, answer)
		return
	}
	s.answer(fd, match, answer)
}

// file files the pending entry of a committed offer, with the answer its
// claim sends (pendingEntry.finishLocked).
func (s *server) file(fd int, match Match, answer Payload) {
	n := s.n
	e := &pendingEntry{fd: fd, match: match, answer: &answer}
	e.mu.Lock()
	old, why := n.pend.insert(match.Request.Tuple.canon(), e)
	e.mu.Unlock()
	if why != ReasonNone {
		n.pend.dropped(match, DropUndelivered)
		s.refuse(fd, why, "too many pending offers")
		return
	}
	if old != nil {
		n.pend.finish(old, DropReplaced)
	}
}

// answer files the pending entry, then sends the answer. The entry is in
// the table before the connector can see the answer, so its accept()
// cannot miss it; the entry's lock is held while sending, so a Claim waits
// for the send to finish.
func (s *server) answer(fd int, match Match, answer Payload) {
	n := s.n
	key := match.Request.Tuple.canon()
	e := &pendingEntry{fd: fd, match: match}
	e.mu.Lock()
	old, why := n.pend.insert(key, e)
	if why != ReasonNone {
		e.mu.Unlock()
		n.pend.dropped(match, DropUndelivered)
		s.refuse(fd, why, "too many pending offers")
		return
	}
	m := message{kind: kindAnswer, nfiles: len(answer.Files), tuple: match.Request.Tuple, pid: uint32(n.pid), data: answer.Data}
	err := sendFrame(fd, m.encode(), answer.Files, time.Now().Add(n.cfg.ReadTimeout))
	if err != nil {
		n.pend.take(e)
		now := e.finishLocked(verdictDeclined, DropUndelivered)
		e.mu.Unlock()
		if now {
			n.pend.dropped(match, DropUndelivered)
		}
	} else {
		n.stats.answered.Add(1)
		e.mu.Unlock()
	}
	if old != nil {
		n.pend.finish(old, DropReplaced)
	}
}

func (s *server) callHandler(req Request) (answer Payload, prepared any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.n.stats.handlerPanics.Add(1)
			answer, prepared, err = Payload{}, nil, fmt.Errorf("handler panic: %v", p)
		}
	}()
	return s.n.cfg.Handler(req)
}

// refuseAtLimit accepts one connection in the spare fd's place and
// refuses it (fdhook.AtLimit); false when the backlog is empty.
func (s *server) refuseAtLimit() bool {
	fd, _, err := unix.Accept4(s.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	if err != nil {
		return false
	}
	s.n.stats.conns.Add(1)
	s.refuse(fd, ReasonFDLimit, "the process is at its fd limit")
	return true
}

// refuse sends a refusal without waiting long, then closes fd.
func (s *server) refuse(fd int, r Reason, text string) {
	s.n.stats.refused.Add(1)
	if len(text) > maxText {
		text = text[:maxText]
	}
	m := message{kind: kindRefusal, reason: r, pid: uint32(s.n.pid), data: []byte(text)}
	sendFrame(fd, m.encode(), nil, time.Now().Add(10*time.Millisecond))
	unix.Close(fd)
}

// requestOf checks one offer (m, decoded with err) and its files. On
// error every file is closed; on success the request owns them.
func requestOf(m message, files []int, err error) (Request, error) {
	switch {
	case err != nil:
	case m.kind != kindOffer && m.kind != kindOfferCommitted:
		err = fmt.Errorf("kind %d, want offer: %w", m.kind, errMessage)
	case m.nfiles != len(files):
		err = fmt.Errorf("%d files announced, %d received: %w", m.nfiles, len(files), errMessage)
	case !m.tuple.validOffer(m.kind == kindOfferCommitted):
		err = fmt.Errorf("tuple %s: %w", m.tuple, errMessage)
	}
	if err != nil {
		closeFiles(files)
		return Request{}, err
	}
	return Request{Tuple: m.tuple, PID: int(m.pid), Payload: Payload{Data: m.data, Files: files}, committed: m.kind == kindOfferCommitted, sock: m.sock}, nil
}

// listening reports whether a registered address accepts connections to
// server (the listener may have closed since the connector's Lookup).
func (n *Node) listening(server netip.AddrPort) bool {
	dst := netip.AddrPortFrom(server.Addr().Unmap().WithZone(""), server.Port())
	n.mu.Lock()
	defer n.mu.Unlock()
	for l := range n.regs[dst.Port()] {
		if listenMatches(l, dst, func() bool { return true }) {
			return true
		}
	}
	return false
}
