package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Offer runs the connector's side of the rendezvous, after its TCP socket
// is bound (t.Client known) and before its connect(): it connects to the
// entry's socket, checks the listener's SO_PEERCRED uid against the
// allowed set, sends t, its pid and offer, and waits for the answer until
// ctx's deadline (Config.OfferTimeout when ctx has none). The caller keeps
// ownership of offer.Files.
//
// On success the caller owns the returned Answer (and its Payload.Files)
// and must call exactly one of Commit (then connect()) or Abort (then a
// plain connect()). Every error is a *FallbackError: ReasonRefused (uid,
// or a refusal), ReasonTimeout, ReasonProtocol, ReasonPeerGone (the
// listener process died), ReasonNotShimmed (its listener closed), or the
// reason of the Handler's refusal; files that arrived are closed.
func (n *Node) Offer(ctx context.Context, e Entry, t Tuple, offer Payload) (*Answer, error) {
	n.stats.offers.Add(1)
	a, err := n.offer(ctx, e, t, offer, false, 0)
	if err != nil {
		n.stats.fallback(err)
		return nil, err
	}
	n.stats.offersAnswered.Add(1)
	return a, nil
}

// OfferCommitted sends a committed offer: the offer and its commit at
// once, for a connector that makes its TCP connect() right after it
// returns, without waiting for an answer. The listener files the offer
// (its server, or the Claim that looks for it); the answer comes when
// accept() claims the connection and is the verdict "accepted"
// (Answer.Verdict, whose Payload then holds the answer). The caller keeps
// ownership of offer.Files. Errors are those of Offer before the answer:
// the listener's process gone or not allowed, a full backlog, a bad tuple.
//
// t.Client's port may be 0 (an unbound offer, unbound.go): the socket is
// left for connect() to bind, and Answer.Bound sends the port after it.
// sock is then the connector's TCP socket (or -1), whose identity the
// offer carries: by it the listener knows the offer of a connection it
// accepted before the port came.
func (n *Node) OfferCommitted(e Entry, t Tuple, offer Payload, sock int) (*Answer, error) {
	n.stats.offers.Add(1)
	a, err := n.offer(context.Background(), e, t, offer, true, socketID(t, sock))
	if err != nil {
		n.stats.fallback(err)
		return nil, err
	}
	return a, nil
}

func (n *Node) offer(ctx context.Context, e Entry, t Tuple, offer Payload, committed bool, sock uint32) (*Answer, error) {
	if len(e.Socket) > maxSockPath {
		return nil, &FallbackError{ReasonProtocol, fmt.Errorf("offer %s: invalid entry", t)}
	}
	if err := n.offerable(t, offer, committed); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &FallbackError{ReasonPeerGone, fmt.Errorf("offer: socket: %w", err)}
	}
	g := newGuardedFD(fd)
	var a *Answer
	if committed {
		// Nothing to wait for: the frame fits the empty socket's buffer.
		if err = n.dial(fd, e); err == nil {
			err = n.send(fd, kindOfferCommitted, t, sock, offer, time.Now().Add(n.cfg.OfferTimeout))
		}
		if err == nil {
			return n.oneWayAnswer(g, t), nil
		}
	} else {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(n.cfg.OfferTimeout)
		}
		stop := context.AfterFunc(ctx, g.shutdown)
		a, err = n.exchange(fd, e, t, offer, deadline)
		if !stop() && err == nil {
			// ctx ended while the answer came: the socket may be shut down.
			a.Payload.CloseFiles()
			err = ctx.Err()
		}
		if err != nil && ctx.Err() != nil {
			err = &FallbackError{ReasonTimeout, fmt.Errorf("offer %s: %w", t, ctx.Err())}
		}
	}
	if err != nil {
		g.close()
		return nil, err
	}
	n.hold(g)
	a.g = g
	return a, nil
}

// offerable checks an offer before it goes: its tuple and payload, and
// this process's share of its fd limit (each Answer waiting for its
// verdict holds an fd).
func (n *Node) offerable(t Tuple, offer Payload, committed bool) error {
	if !t.validOffer(committed) || !offer.fits() {
		return &FallbackError{ReasonProtocol, fmt.Errorf("offer %s: invalid tuple or payload", t)}
	}
	if int(n.answers.Load()) >= fdShare() {
		return &FallbackError{ReasonFDLimit, fmt.Errorf("offer %s: answers waiting for their verdict hold this process's share of its fd limit", t)}
	}
	return nil
}

// hold counts g, an Answer's connection, until it closes.
func (n *Node) hold(g *guardedFD) {
	n.answers.Add(1)
	g.onClose = func() { n.answers.Add(-1) }
}

// oneWayAnswer is the Answer of a committed offer of t sent on g, which
// it holds: its verdict comes on g.
func (n *Node) oneWayAnswer(g *guardedFD, t Tuple) *Answer {
	n.hold(g)
	return &Answer{committed: true, oneWay: true, tuple: t, answered: &n.stats.offersAnswered, g: g}
}

// exchange connects, sends the offer and reads the answer on fd.
func (n *Node) exchange(fd int, e Entry, t Tuple, offer Payload, deadline time.Time) (*Answer, error) {
	if err := n.dial(fd, e); err != nil {
		return nil, err
	}
	if err := n.send(fd, kindOffer, t, 0, offer, deadline); err != nil {
		return nil, err
	}
	body, files, err := recvFrame(fd, nil, deadline)
	if err != nil {
		return nil, ioFallback("receive answer", err)
	}
	r, err := decodeMessage(body)
	switch {
	case err != nil:
	case r.kind == kindRefusal:
		err = &FallbackError{r.reason, &RefusedError{Reason: r.reason, Text: string(r.data)}}
	case r.kind != kindAnswer:
		err = fmt.Errorf("kind %d, want answer: %w", r.kind, errMessage)
	case r.nfiles != len(files):
		err = fmt.Errorf("%d files announced, %d received: %w", r.nfiles, len(files), errMessage)
	case r.tuple.canon() != t.canon():
		err = fmt.Errorf("answer for %s, offered %s: %w", r.tuple, t, errMessage)
	}
	if err != nil {
		closeFiles(files)
		return nil, fallback(ReasonProtocol, err)
	}
	return &Answer{Payload: Payload{Data: r.data, Files: files}}, nil
}

// dial connects fd to the listener process's socket and checks its uid.
func (n *Node) dial(fd int, e Entry) error {
	err := unix.Connect(fd, &unix.SockaddrUnix{Name: e.Socket})
	switch err {
	case nil:
	case unix.EAGAIN:
		return &FallbackError{ReasonTimeout, fmt.Errorf("offer: %s backlog full", e.Socket)}
	case unix.ENOENT, unix.ECONNREFUSED:
		n.forget(e) // its process died (in another pid namespace, Lookup could not tell)
		return &FallbackError{ReasonPeerGone, fmt.Errorf("offer: connect %s: %w", e.Socket, err)}
	default:
		return &FallbackError{ReasonPeerGone, fmt.Errorf("offer: connect %s: %w", e.Socket, err)}
	}
	cred, err := peerCred(fd)
	if err != nil {
		return &FallbackError{ReasonPeerGone, fmt.Errorf("offer: SO_PEERCRED: %w", err)}
	}
	if !n.allowed(cred.Uid) {
		return &FallbackError{ReasonRefused, fmt.Errorf("offer: listener uid %d: %w", cred.Uid, ErrUIDNotAllowed)}
	}
	return nil
}

// send sends an offer of kind k (offer or committed offer).
func (n *Node) send(fd int, k kind, t Tuple, sock uint32, offer Payload, deadline time.Time) error {
	m := message{kind: k, nfiles: len(offer.Files), tuple: t, pid: uint32(n.pid), sock: sock, data: offer.Data}
	if err := sendFrame(fd, m.encode(), offer.Files, deadline); err != nil {
		if r := refusalQueued(fd); r != nil {
			return r // refused before it read the offer (our uid)
		}
		return ioFallback("send offer", err)
	}
	return nil
}

// ioFallback classifies a send or receive failure.
func ioFallback(what string, err error) error {
	err = fmt.Errorf("offer: %s: %w", what, err)
	switch {
	case errors.Is(err, errTimeout):
		return &FallbackError{ReasonTimeout, err}
	case errors.Is(err, errMessage) && !errors.Is(err, errEOF):
		return &FallbackError{ReasonProtocol, err}
	}
	return &FallbackError{ReasonPeerGone, err} // EOF, EPIPE, ECONNRESET
}

// refusalQueued returns the refusal a server queued before closing the
// connection, when a send to it failed: a server refuses a uid it does not
// allow before it reads the offer, so the offer's send may meet a closed
// socket (EPIPE) while the reason waits to be read. nil when there is none.
func refusalQueued(fd int) error {
	body, files, err := recvFrame(fd, nil, time.Now().Add(10*time.Millisecond))
	closeFiles(files)
	if err != nil {
		return nil
	}
	r, err := decodeMessage(body)
	if err != nil || r.kind != kindRefusal {
		return nil
	}
	return &FallbackError{r.reason, &RefusedError{Reason: r.reason, Text: string(r.data)}}
}
