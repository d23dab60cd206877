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
)

// server is a Node's rendezvous socket and the goroutines serving it: one
// accept loop, and one goroutine per connection (at most MaxConns, and at
// most half of them from one peer process: peerShare), each bounded by
// ReadTimeout plus the Handler's time.
type server struct {
	n       *Node
	fd      int // listening socket, blocking
	path    string
	closing atomic.Bool
	active  atomic.Int32 // connections being served
	peers   peerCounts   // the same, per peer process
	loop    sync.WaitGroup
	conns   sync.WaitGroup
}

// startServer binds <rundir>/p<pid>-<random>.sock (mode 0600) and starts
// serving it. Called with n.mu held.
func startServer(n *Node) (*server, error) {
	var srv *server
	err := n.withRunDir(true, func(dirfd int) error {
		n.sweep(dirfd)
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
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
	srv.loop.Add(1)
	go srv.acceptLoop()
	return srv, nil
}

// stop closes the socket and waits for the accept loop and every
// connection goroutine.
func (s *server) stop() {
	s.closing.Store(true)
	// shutdown wakes the blocked accept (it returns EINVAL); the fd stays
	// valid until the loop has returned.
	unix.Shutdown(s.fd, unix.SHUT_RDWR)
	s.loop.Wait()
	fdhook.CloseFD(s.fd)
	unix.Unlink(s.path)
	s.conns.Wait()
}

func (s *server) acceptLoop() {
	defer s.loop.Done()
	for {
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
		case (err == unix.EMFILE || err == unix.ENFILE) && fdhook.AtLimit(s.refuseAtLimit):
			// The process is at its fd limit: the connector hears so at
			// once (and its connection stays on kernel TCP).
			continue
		case err != nil:
			// Out of memory, or no spare fd: the connection waits in the
			// backlog; back off instead of spinning on the same failure.
			time.Sleep(10 * time.Millisecond)
			continue
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
		if frameQueued(fd) {
			// The whole request is there already (the usual case: the
			// connector sends it right after its connect): served on
			// this goroutine, without the hand-off to a new one.
			s.serve(fd, cred, peer)
			continue
		}
		go s.serve(fd, cred, peer)
	}
}

// frameQueued reports whether a whole small offer is queued on fd, so
// that serving it cannot wait on the peer (a peer that sends half a
// frame and stops would hold the accept loop until ReadTimeout). Only an
// offer: a pull's handler makes an offer itself, maybe to this very
// process, whose accept loop would then be the one waiting.
func frameQueued(fd int) bool {
	var b [512]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if err != nil || n < 4+headerLen {
		return false
	}
	want := 4 + int(binary.LittleEndian.Uint32(b[:4]))
	return want <= len(b) && n >= want && kind(b[4+5]) == kindOffer
}

// serve handles one rendezvous connection from cred (peer is its key):
// one request, the Handler, the answer. On success the fd passes to the
// pending entry, which closes it; otherwise it is closed here.
func (s *server) serve(fd int, cred *unix.Ucred, peer peerKey) {
	defer s.conns.Done()
	defer s.active.Add(-1)
	defer s.peers.remove(peer)
	n := s.n
	deadline := time.Now().Add(n.cfg.ReadTimeout)
	if !n.allowed(cred.Uid) {
		n.stats.uidRejected.Add(1)
		s.refuse(fd, ReasonRefused, ErrUIDNotAllowed.Error())
		return
	}
	body, files, err := recvFrame(fd, deadline)
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
	s.answer(fd, match, answer)
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
		n.pend.take(key, e)
		now := e.finishLocked(verdictDeclined)
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

// refuse sends a refusal without waiting long, then closes fd.
// refuseAtLimit accepts one connection in the spare fd's place and
// refuses it (fdhook.AtLimit).
func (s *server) refuseAtLimit() {
	fd, _, err := unix.Accept4(s.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	if err == nil {
		s.n.stats.conns.Add(1)
		s.refuse(fd, ReasonFDLimit, "the process is at its fd limit")
	}
}

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
	case m.kind != kindOffer:
		err = fmt.Errorf("kind %d, want offer: %w", m.kind, errMessage)
	case m.nfiles != len(files):
		err = fmt.Errorf("%d files announced, %d received: %w", m.nfiles, len(files), errMessage)
	case !m.tuple.valid():
		err = fmt.Errorf("tuple %s: %w", m.tuple, errMessage)
	}
	if err != nil {
		closeFiles(files)
		return Request{}, err
	}
	return Request{Tuple: m.tuple, PID: int(m.pid), Payload: Payload{Data: m.data, Files: files}}, nil
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
