package rendezvous

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// The PULL of deferred acceptance (deferred.go). Wire: one frame of kind
// kindPull, the tuple as the puller sees it (Client: the connector's
// address, Server: the puller's local address), the puller's pid, and
// data:
//
//	0..15   the record's nonce
//	16..23  the puller's start time (/proc/PID/stat field 22), little endian
//	24..31  the inode of the puller's pid namespace (0: unknown), little endian
//	32..    the path of the puller's rendezvous socket
//
// The connector answers after its OnPull returned: kind answer (no data,
// no files: the offer went to the puller's server and was committed) or a
// refusal with its reason (it fell back already, or the nonce is wrong,
// or its offer failed). Or OnPull made the committed offer on the PULL's
// own connection (PullRequest.OfferHere): that frame is the answer, and
// the puller's verdict comes back on the same connection, as on an
// offer's own.

// PullRequest is a PULL as the connector's OnPull sees it.
type PullRequest struct {
	// Tuple is the connection as the puller sees it: Client is the
	// connector's address, Server the puller's local address.
	Tuple Tuple
	// Nonce is the one the puller read in the record.
	Nonce [16]byte
	// From is the puller, to offer the connection to: PID (its
	// SO_PEERCRED pid), Start, UID (SO_PEERCRED) and Socket (its
	// rendezvous server, checked to lie in the run directory and to be
	// named for PID).
	From Entry

	here *pullConn // the PULL's connection (OfferHere)
}

// pullConn is the connection a PULL came on, as OfferHere uses it.
type pullConn struct {
	n    *Node
	fd   int
	used bool // an offer went on it: the Answer holds fd
}

// OfferHere makes the committed offer of the pulled connection (t and
// offer as for OfferCommitted) on the PULL's own connection, which the
// returned Answer then holds: the puller files and claims it there, with
// no connection to its server and no wake of the goroutine that serves
// it. The offer is the PULL's answer, so a handler calls it at most once,
// and after it the PULL gets no other answer whatever the handler
// returns (an Answer abandoned ends the connection, and the puller
// declines the offer).
func (r PullRequest) OfferHere(t Tuple, offer Payload) (*Answer, error) {
	h := r.here
	if h == nil || h.used {
		return nil, &FallbackError{ReasonProtocol, errors.New("pull: no connection to offer on")}
	}
	n := h.n
	n.stats.offers.Add(1)
	err := n.offerable(t, offer, true)
	if err == nil {
		err = n.send(h.fd, kindOfferCommitted, t, 0, offer, time.Now().Add(n.cfg.OfferTimeout))
	}
	if err != nil {
		n.stats.fallback(err)
		return nil, err
	}
	h.used = true
	return n.oneWayAnswer(newGuardedFD(h.fd), t), nil
}

// PullHandler is the connector's side of a PULL (Config.OnPull). It runs
// on the rendezvous server's goroutine while the puller waits (PullWait):
// it decides, under the connection's lock, whether the deferred connection
// is still waiting (then it makes a normal Offer to req.From and commits
// it before returning nil) or was decided already (an error whose
// *FallbackError reason the puller gets). It must return within about a
// second.
type PullHandler func(req PullRequest) error

// PullWait bounds a Pull: the connector's offer, channel setup included
// (about a second), and the round trips.
const PullWait = 2 * time.Second

const pullFixedLen = 32

// Serve starts the rendezvous server if none runs (a process without a
// listener needs one to receive the offers of connections it pulls) and
// returns its path.
func (n *Node) Serve() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return "", &FallbackError{ReasonRunDir, ErrClosed}
	}
	if err := n.serveLocked(); err != nil {
		return "", err
	}
	return n.srv.path, nil
}

// serveLocked starts the server if none runs. n.mu held.
func (n *Node) serveLocked() error {
	if n.srv != nil {
		return nil
	}
	if n.cfg.Handler == nil {
		return &FallbackError{ReasonRunDir, fmt.Errorf("rendezvous: no Handler configured")}
	}
	srv, err := startServer(n)
	if err != nil {
		return err
	}
	n.srv = srv
	return nil
}

// Pull claims the deferred connection rec for this process: local and
// remote are the accepted socket's addresses. It asks the connector
// (rec's server) to offer the connection to this process, on the PULL's
// connection or to this process's server, waits for the answer until
// deadline, and claims the offer. On success the
// connection is accelerated exactly as after accept()'s Claim (the
// connector hears "accepted"); on any error (a *FallbackError) it is plain
// TCP, and an offer for it that comes later is refused, or dropped if it
// came already, so the connector falls back too.
func (n *Node) Pull(rec Record, local, remote netip.AddrPort, deadline time.Time) (Match, error) {
	n.stats.pulls.Add(1)
	m, err := n.pull(rec, local, remote, deadline)
	if err != nil {
		n.stats.fallback(err)
		return Match{}, err
	}
	n.stats.pullsClaimed.Add(1)
	return m, nil
}

func (n *Node) pull(rec Record, local, remote netip.AddrPort, deadline time.Time) (Match, error) {
	key := Tuple{Client: remote, Server: local}.canon()
	if !key.valid() || len(rec.Socket) > maxSockPath {
		return Match{}, &FallbackError{ReasonProtocol, fmt.Errorf("pull %s: invalid tuple or record", key)}
	}
	path, err := n.Serve()
	if err != nil {
		return Match{}, err
	}
	n.pend.expect(key)
	defer n.pend.unexpect(key)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Match{}, &FallbackError{ReasonPeerGone, fmt.Errorf("pull: socket: %w", err)}
	}
	passed := false // fd went to a pending entry (claimHere)
	defer func() {
		if !passed {
			unix.Close(fd)
		}
	}()
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: rec.Socket}); err != nil {
		return Match{}, &FallbackError{ReasonPeerGone, fmt.Errorf("pull: connect %s: %w", rec.Socket, err)}
	}
	cred, err := peerCred(fd)
	switch {
	case err != nil:
		return Match{}, &FallbackError{ReasonPeerGone, fmt.Errorf("pull: SO_PEERCRED: %w", err)}
	case !n.allowed(cred.Uid):
		return Match{}, &FallbackError{ReasonRefused, fmt.Errorf("pull: connector uid %d: %w", cred.Uid, ErrUIDNotAllowed)}
	case sameNamespace(rec.pidns, n.pidns) && int(cred.Pid) != rec.PID:
		return Match{}, &FallbackError{ReasonRefused, fmt.Errorf("pull: socket %s served by pid %d, record says %d", rec.Socket, cred.Pid, rec.PID)}
	}
	data := make([]byte, pullFixedLen+len(path))
	copy(data, rec.Nonce[:])
	binary.LittleEndian.PutUint64(data[16:], n.start)
	binary.LittleEndian.PutUint64(data[24:], n.nsID)
	copy(data[pullFixedLen:], path)
	msg := message{kind: kindPull, tuple: Tuple{Client: remote, Server: local}, pid: uint32(n.pid), data: data}
	if err := sendFrame(fd, msg.encode(), nil, deadline); err != nil {
		return Match{}, ioFallback("send pull", err)
	}
	body, files, err := recvFrame(fd, nil, deadline)
	if err != nil {
		return Match{}, ioFallback("receive pull answer", err)
	}
	r, err := decodeMessage(body)
	if err == nil && r.kind == kindOfferCommitted {
		passed = true
		return n.claimHere(fd, r, files, cred, key, local, remote)
	}
	closeFiles(files)
	switch {
	case err != nil:
	case r.kind == kindRefusal:
		return Match{}, &FallbackError{r.reason, &RefusedError{Reason: r.reason, Text: string(r.data)}}
	case r.kind != kindAnswer || len(files) != 0 || len(r.data) != 0:
		err = fmt.Errorf("kind %d with %d files, want an empty answer: %w", r.kind, len(files), errMessage)
	}
	if err != nil {
		return Match{}, fallback(ReasonProtocol, err)
	}
	// The connector committed its offer before answering: the entry is in
	// the table and its commit byte queued.
	m, why := n.Claim(local, remote)
	if why != ReasonNone {
		return Match{}, &FallbackError{ReasonProtocol, fmt.Errorf("pull %s: answered, but no committed offer (%v)", key, why)}
	}
	return m, nil
}

// claimHere takes the committed offer m (with files) that the connector
// (cred) made on the PULL's own connection fd (PullRequest.OfferHere):
// filed as this process's server files one, then claimed. fd passes on.
func (n *Node) claimHere(fd int, m message, files []int, cred *unix.Ucred, key Tuple, local, remote netip.AddrPort) (Match, error) {
	req, err := requestOf(m, files, nil)
	if err == nil && req.Tuple.canon() != key {
		closeFiles(req.Payload.Files)
		err = fmt.Errorf("offer of %s on the pull of %s: %w", req.Tuple, key, errMessage)
	}
	if err != nil {
		unix.Close(fd)
		return Match{}, fallback(ReasonProtocol, err)
	}
	req.Cred = *cred
	n.server().serveOffer(fd, req) // pull served first: the server exists from then on
	match, why := n.Claim(local, remote)
	if why != ReasonNone {
		return Match{}, &FallbackError{ReasonProtocol, fmt.Errorf("pull %s: offered on the pull, but not filed (%v)", key, why)}
	}
	return match, nil
}

// servePull handles a PULL on the connector's server: checks, OnPull, the
// answer. fd is closed here.
func (s *server) servePull(fd int, m message, files []int, cred *unix.Ucred) {
	n := s.n
	closeFiles(files)
	n.stats.pullsServed.Add(1)
	req, err := n.pullRequest(m, cred)
	if err != nil {
		n.stats.badRequests.Add(1)
		s.refuse(fd, ReasonProtocol, err.Error())
		return
	}
	if n.cfg.OnPull == nil {
		s.refuse(fd, ReasonNotShimmed, "no deferred connections here")
		return
	}
	req.here = &pullConn{n: n, fd: fd}
	err = s.callPull(req)
	if req.here.used {
		return // the offer answered it, and its Answer holds fd
	}
	if err != nil {
		r := ReasonOf(err)
		if r == ReasonNone || !r.Valid() {
			r = ReasonRefused
		}
		s.refuse(fd, r, err.Error())
		return
	}
	a := message{kind: kindAnswer, tuple: m.tuple, pid: uint32(n.pid)}
	sendFrame(fd, a.encode(), nil, time.Now().Add(n.cfg.ReadTimeout))
	unix.Close(fd)
}

// pullRequest checks a PULL's message against its sender's credentials.
func (n *Node) pullRequest(m message, cred *unix.Ucred) (PullRequest, error) {
	switch {
	case m.nfiles != 0:
		return PullRequest{}, fmt.Errorf("pull with %d files: %w", m.nfiles, errMessage)
	case !m.tuple.valid() || m.tuple.Client.Addr().IsUnspecified():
		return PullRequest{}, fmt.Errorf("pull tuple %s: %w", m.tuple, errMessage)
	case len(m.data) <= pullFixedLen || len(m.data) > pullFixedLen+maxSockPath:
		return PullRequest{}, fmt.Errorf("pull data of %d bytes: %w", len(m.data), errMessage)
	case n.samePIDNSID(binary.LittleEndian.Uint64(m.data[24:])) && int(cred.Pid) != int(m.pid):
		// SO_PEERCRED gives a pid of this namespace: only here must it
		// be the one the puller names.
		return PullRequest{}, fmt.Errorf("pull from pid %d names pid %d: %w", cred.Pid, m.pid, errMessage)
	}
	path := string(m.data[pullFixedLen:])
	if !isSockOf(n.cfg.RunDir, path, int(m.pid)) {
		return PullRequest{}, fmt.Errorf("pull socket %q: %w", path, errMessage)
	}
	req := PullRequest{
		Tuple: m.tuple,
		From: Entry{PID: int(m.pid), Start: binary.LittleEndian.Uint64(m.data[16:]), UID: cred.Uid, Socket: path,
			Listen: m.tuple.Server},
	}
	copy(req.Nonce[:], m.data[:16])
	return req, nil
}

func (s *server) callPull(req PullRequest) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.n.stats.handlerPanics.Add(1)
			err = fmt.Errorf("pull handler panic: %v", p)
		}
	}()
	return s.n.cfg.OnPull(req)
}
