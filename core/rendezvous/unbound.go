package rendezvous

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
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
// (resolve). The connector's accept() may come first: the kernel
// completes a loopback connection inside the connector's connect(). A
// Claim that finds no offer while offers to its address are unbound, and
// were made recently (unboundFresh), waits for their frames up to
// unboundWait (find). When it gives up with some still unbound, fresh or
// not, the connection is plain and its 4-tuple is noted (missed): an
// offer bound to it later is dropped (DropUnbound), and its connector
// hears "declined" at once rather than when the offer expires. So both sides always agree. An abort byte instead of the
// frame withdraws the offer; the connector's end before it drops the
// offer too, since no byte can have been written on a connection whose
// connector never got back from connect().

// unboundWait bounds a Claim's wait for unbound offers' ports. The
// connector sends its frame right after its connect() returns, so the
// wait is the connector's way from the kernel back to its code; it is
// long only when the connector's thread lost its CPU there.
var unboundWait = 20 * time.Millisecond // a variable for the tests only

// unboundFresh is how old an unbound offer a Claim still waits for: one
// older belongs to a connect() the kernel has not completed (a lost SYN,
// a full backlog), not to the connection just accepted.
const unboundFresh = 200 * time.Millisecond

// find looks for the offer of the connection key (canonical) that Claim
// did not find filed: in the rendezvous socket's backlog, where a
// committed offer goes before the connector's connect(), and among the
// unbound offers, waiting for their ports (above).
func (n *Node) find(key Tuple) *pendingEntry {
	n.pend.resolveAll() // the usual case: an unbound offer whose port came
	if e := n.pend.takeFor(key); e != nil {
		return e
	}
	if srv := n.server(); srv != nil {
		srv.intake()
	}
	n.pend.resolveAll()
	e := n.pend.takeFor(key)
	deadline := time.Now().Add(unboundWait)
	for e == nil {
		fds, some := n.pend.unboundTo(key.Server)
		left := time.Until(deadline)
		switch {
		case !some:
			return nil
		case len(fds) == 0 || left <= 0:
			return n.pend.miss(key)
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
		e = n.pend.takeFor(key)
	}
	return e
}

// unboundTo returns the fds of the fresh unbound offers to server
// (canonical), and whether any unbound offer to it is left.
func (p *pendingTable) unboundTo(server netip.AddrPort) (fresh []int, some bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.unbound {
		if canon(e.key.Server) != server {
			continue
		}
		some = true
		if time.Since(e.filed) < unboundFresh {
			fresh = append(fresh, e.fd)
		}
	}
	return fresh, some
}

// miss notes that a Claim leaves the connection key (canonical) plain
// while offers to its address are still unbound: an offer bound to key
// later is dropped. An offer another Claim's resolve filed under key
// since this one looked is taken and returned instead.
func (p *pendingTable) miss(key Tuple) *pendingEntry {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.unfileLocked(key); e != nil {
		return e
	}
	for k, until := range p.missed {
		if now.After(until) {
			delete(p.missed, k)
		}
	}
	if len(p.missed) < p.n.cfg.MaxPending {
		p.missed[key] = now.Add(p.n.cfg.PendingTimeout)
	}
	return nil
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
