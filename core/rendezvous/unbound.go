package rendezvous

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/sockdiag"
)

// Unbound offers. A connector that binds its socket before connect(), to
// name the 4-tuple in its offer, takes a port no other socket may hold,
// TIME_WAIT included, and the kernel's own choice at connect() then
// skips it too: a client that opens connections faster than TIME_WAIT
// turns the ephemeral range over runs out of ports where kernel TCP,
// which shares a port among destinations, would not. So a committed
// offer may leave the client's port 0: the socket stays unbound, the
// kernel's connect() picks its port as for any connect(), and the
// connector sends a bound frame with the 4-tuple right after that
// connect() returned (Answer.Bound), before the program can write.
//
// The listener keeps such an offer among the unbound ones until its
// bound frame comes, then files it under its 4-tuple like any other
// (resolve). The listener's accept() may come first: the kernel completes
// a loopback connection inside the connector's connect(). The offer
// carries the inode of the connector's socket, and a Claim that finds no
// offer while offers to its address are unbound asks the kernel's socket
// diagnostics which socket is at the other end of its connection
// (sockdiag.Peer): the offer with that socket's inode is its own, whose
// frame it waits for up to unboundOwnWait; the others are other
// connections', which it does not wait for at all. Where the kernel
// cannot say (no inet_diag), it waits for the frames of the offers to its
// address made recently (unboundFresh), up to unboundWait (find).
//
// When a Claim gives up with offers still unbound, the connection is
// plain and its 4-tuple is noted (missed): an offer bound to it later is
// dropped (DropUnbound), and its connector hears "declined" at once
// rather than when the offer expires. So both sides always agree. An
// abort byte instead of the frame withdraws the offer; the connector's
// end before it drops the offer too, since no byte can have been written
// on a connection whose connector never got back from connect().

// unboundWait bounds a Claim's wait for unbound offers' ports when it
// cannot tell whether one of them is its connection's: the kernel's
// socket diagnostics are unavailable (sockdiag.ErrUnsupported), or an
// offer came without its socket's identity. The connector sends its
// frame right after its connect() returns, so the wait is the
// connector's way from the kernel back to its code; it is long only when
// the connector's thread lost its CPU there.
var unboundWait = 20 * time.Millisecond // a variable for the tests only

// unboundOwnWait bounds a Claim's wait for the frame of the unbound offer
// that the kernel says is its connection's (its socket's inode, from
// sockdiag.Peer, is the offer's). That connector is between its connect()
// and its frame, so the frame comes unless it died (its end ends the wait
// at once) or is stopped; a starved thread may take tens of
// milliseconds on a loaded machine, which must not cost the connection
// its acceleration.
const unboundOwnWait = time.Second

// unboundFresh is how old an unbound offer a Claim still waits for without
// knowing it is its connection's: one older belongs to a connect() the
// kernel has not completed (a lost SYN, a full backlog), not to the
// connection just accepted.
const unboundFresh = 200 * time.Millisecond

// find looks for the offer of the connection key (canonical) that Claim
// did not find filed: in the rendezvous socket's backlog, where a
// committed offer goes before the connector's connect(), and among the
// unbound offers, waiting for their ports (above). It returns the entry,
// or why there is none: ReasonNotShimmed (no offer), ReasonConnectorLate
// (it gave up waiting with offers to the address still unbound).
func (n *Node) find(key Tuple) (*pendingEntry, Reason) {
	n.pend.resolveAll() // the usual case: an unbound offer whose port came
	if e := n.pend.takeFor(key); e != nil {
		return e, ReasonNone
	}
	if srv := n.server(); srv != nil {
		srv.intake()
	}
	n.pend.resolveAll()
	if e := n.pend.takeFor(key); e != nil {
		return e, ReasonNone
	}
	start := time.Now()
	var who connector
	for asked := false; ; {
		fds, own, some := n.pend.unboundFor(key.Server, who)
		if some && !asked {
			who, asked = askConnector(key), true
			continue
		}
		wait := unboundWait
		if own {
			wait = unboundOwnWait
		}
		left := wait - time.Since(start)
		switch {
		case len(fds) == 0:
			return n.pend.miss(key, ReasonNotShimmed)
		case left <= 0:
			return n.pend.miss(key, ReasonConnectorLate)
		}
		pfd := make([]unix.PollFd, len(fds))
		for i, fd := range fds {
			pfd[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		// An fd read here may be closed and reused meanwhile (its entry
		// dropped): an early return at most, since the next round looks
		// at the table again.
		unix.Poll(pfd, int(left/time.Millisecond)+1)
		n.pend.resolveAll()
		if e := n.pend.takeFor(key); e != nil {
			return e, ReasonNone
		}
	}
}

// connector is what the kernel says of an accepted connection's
// connecting socket (askConnector): known, its inode (0: closed already,
// or in another network namespace) and owner.
type connector struct {
	known bool
	ino   uint32
	uid   uint32
}

// askConnector asks the kernel's socket diagnostics for the connecting
// socket of the connection key (canonical), accepted here.
func askConnector(key Tuple) connector {
	ino, uid, err := sockdiag.Peer(key.Server, key.Client)
	switch {
	case err == nil:
		return connector{known: true, ino: ino, uid: uid}
	case errors.Is(err, sockdiag.ErrNotFound):
		return connector{known: true}
	}
	return connector{}
}

// awaits says whether an acceptor of the connection whose connector is
// who waits for an unbound offer or pending record of the socket ino
// (0: it came without its socket's identity), sameOwner when its owner is
// the socket's, fresh when it is younger than unboundFresh; and whether it
// is the connection's own (waited for up to unboundOwnWait, whatever its
// age). Where the kernel could not say whose the connection is, every
// fresh one is waited for (up to unboundWait); where it could, the own
// one and the fresh ones without an identity.
func (who connector) awaits(ino uint32, sameOwner, fresh bool) (wait, own bool) {
	switch {
	case who.known && who.ino != 0 && ino == who.ino && sameOwner:
		return true, true
	case who.known && ino != 0:
		return false, false
	}
	return fresh, false
}

// unboundFor returns the fds of the unbound offers to server (canonical)
// that the connection whose connector is who waits for (awaits), whether
// one of them is its own, and whether any offer to server is unbound.
func (p *pendingTable) unboundFor(server netip.AddrPort, who connector) (fds []int, own, some bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.unbound {
		if canon(e.key.Server) != server {
			continue
		}
		some = true
		r := &e.match.Request
		wait, mine := who.awaits(r.sock, r.Cred.Uid == who.uid, time.Since(e.filed) < unboundFresh)
		if wait {
			fds = append(fds, e.fd)
		}
		own = own || mine
	}
	return fds, own, some
}

// socketID returns the identity of the socket sock that an unbound
// offer or deferral (t's client port 0) carries: its inode, or 0 when it
// is not one or has none to give (sock -1).
func socketID(t Tuple, sock int) uint32 {
	if !t.unbound() || sock < 0 {
		return 0
	}
	ino, _ := sockdiag.Inode(sock)
	return ino
}

// miss notes that a Claim leaves the connection key (canonical) plain,
// for the reason why, while offers to its address may still be unbound:
// an offer bound to key later is dropped. An offer another Claim's
// resolve filed under key since this one looked is taken and returned
// instead.
func (p *pendingTable) miss(key Tuple, why Reason) (*pendingEntry, Reason) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.unfileLocked(key); e != nil {
		return e, ReasonNone
	}
	for k, until := range p.missed {
		if now.After(until) {
			delete(p.missed, k)
		}
	}
	if len(p.unbound) > 0 && len(p.missed) < p.n.cfg.MaxPending {
		p.missed[key] = now.Add(p.n.cfg.PendingTimeout)
	}
	return nil, why
}

// unlistLocked removes e from the unbound offers, its peer's count
// unchanged; false when it is not there. p.mu held.
func (p *pendingTable) unlistLocked(e *pendingEntry) bool {
	for i, x := range p.unbound {
		if x == e {
			p.unbound = append(p.unbound[:i], p.unbound[i+1:]...)
			return true
		}
	}
	return false
}

// resolveAll reads, without waiting, what the unbound offers' connectors
// sent: each offer is bound, dropped, or left waiting (resolve).
func (p *pendingTable) resolveAll() {
	p.mu.Lock()
	list := append([]*pendingEntry(nil), p.unbound...)
	p.mu.Unlock()
	for _, e := range list {
		p.resolve(e)
	}
}

// resolve reads what e's connector sent after its unbound offer, without
// waiting: a bound frame files e under its 4-tuple (or drops it, when a
// Claim left that connection plain already); an abort byte, the
// connection's end or anything else drops it; nothing leaves it waiting.
func (p *pendingTable) resolve(e *pendingEntry) {
	e.mu.Lock()
	if e.done || !e.key.unbound() { // finished, or bound by another resolve
		e.mu.Unlock()
		return
	}
	t, got, cause := readBound(e.fd, e.match.Request.Tuple)
	if !got && cause == 0 {
		e.mu.Unlock()
		return
	}
	var old *pendingEntry
	p.mu.Lock()
	listed := p.unlistLocked(e)
	if listed && got {
		if until, ok := p.missed[t.canon()]; ok && time.Now().Before(until) {
			cause = DropUnbound
		} else {
			old = p.fileLocked(t.canon(), e)
		}
	}
	if listed && cause != 0 {
		p.releaseLocked(e)
	}
	p.mu.Unlock()
	if !listed {
		e.mu.Unlock() // taken meanwhile (expired, dropped): its taker finishes it
		return
	}
	if cause == 0 {
		e.match.Request.Tuple = t
		e.mu.Unlock()
		if old != nil {
			p.finish(old, DropReplaced)
		}
		return
	}
	now := e.finishLocked(verdictDeclined, cause)
	e.mu.Unlock()
	if now {
		p.dropped(e.match, cause)
	}
}

// fileLocked files an entry just unlisted from the unbound offers under
// key (canonical), its peer still counted, and returns any entry it
// replaced there (unfiled). p.mu held.
func (p *pendingTable) fileLocked(key Tuple, e *pendingEntry) *pendingEntry {
	old := p.m[key]
	if old != nil {
		p.unfileLocked(key)
	}
	e.key = key
	p.m[key] = e
	return old
}

// readBound reads the bound frame of an unbound offer of offered from fd
// without waiting: got with the 4-tuple; or the drop cause (DropAborted
// for an abort byte, DropUnbound for the connection's end or a frame that
// is not a bound frame for offered's server); or neither while nothing
// came.
func readBound(fd int, offered Tuple) (t Tuple, got bool, cause DropCause) {
	var buf [peekLen]byte
	seen, queued, eof := peekFrame(fd, &buf)
	switch {
	case eof:
		return Tuple{}, false, DropUnbound
	case !queued:
		return Tuple{}, false, 0
	case seen[0] == abortByte:
		return Tuple{}, false, DropAborted
	}
	m, files, err := recvQueued(fd, seen)
	closeFiles(files)
	switch {
	case err != nil:
	case m.kind != kindBound || m.nfiles != 0 || len(m.data) != 0:
		err = fmt.Errorf("kind %d with %d files, want a bound frame: %w", m.kind, m.nfiles, errMessage)
	case !m.tuple.valid() || canon(m.tuple.Server) != canon(offered.Server):
		err = fmt.Errorf("bound to %s, offered %s: %w", m.tuple, offered, errMessage)
	}
	if err != nil {
		return Tuple{}, false, DropUnbound
	}
	return m.tuple, true, 0
}
