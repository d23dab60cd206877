package rendezvous

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pendingTable holds accepted offers until accept() claims them, keyed by
// the canonical 4-tuple. An entry leaves the table exactly once (take);
// whoever takes it, or the server whose answer failed, finishes it under
// its lock: verdict byte, close, and OnDrop unless claimed.
//
// A 4-tuple offered again while an entry for it waits replaces that entry
// (DropReplaced): the newer offer is the one whose connect() comes next.
// The kernel does not reuse a 4-tuple while the old connection exists, so
// the older entry belongs to a connect that failed or was never made.
type pendingTable struct {
	n      *Node
	mu     sync.Mutex
	closed bool
	m      map[Tuple]*pendingEntry
	peers  peerCounts // entries of m per connector process (peers.go)
	// Pulls (pull.go): tuples this process is pulling, whose offers it
	// takes without a listener; and tuples whose pull ended, whose offers
	// it refuses until the time noted (the connector then falls back).
	expecting map[Tuple]int
	gone      map[Tuple]time.Time
	// Until then no offer is filed (ReasonFDLimit): the program's
	// accept() ran out of fds (ReleaseForAccept).
	scarceUntil time.Time
	// Unbound offers waiting for their port, and the 4-tuples a claim
	// left plain while some were (unbound.go).
	unbound []*pendingEntry
	missed  map[Tuple]time.Time
}

// pendingEntry is one accepted offer. fd is the rendezvous connection,
// kept to read the connector's commit byte and to send the verdict. A
// committed offer's entry keeps the Handler's answer, which is its
// verdict "accepted".
type pendingEntry struct {
	mu     sync.Mutex
	fd     int
	match  Match
	answer *Payload // a committed offer's answer, sent at the claim; else nil
	key    Tuple    // the 4-tuple filed under; client port 0 while unbound (set with mu held)
	filed  time.Time
	timer  *time.Timer
	done   bool // finished: fd closed
}

func (p *pendingTable) init(n *Node) {
	p.n = n
	p.m = map[Tuple]*pendingEntry{}
	p.expecting = map[Tuple]int{}
	p.gone = map[Tuple]time.Time{}
	p.missed = map[Tuple]time.Time{}
}

// expect notes that this process pulls key (canonical): its offer is
// taken even where no listener is registered.
func (p *pendingTable) expect(key Tuple) {
	p.mu.Lock()
	p.expecting[key]++
	delete(p.gone, key)
	p.mu.Unlock()
}

// unexpect ends a pull of key: an offer for it that comes later is
// refused for PendingTimeout, and one filed and not claimed is dropped
// now (the connector hears "declined").
func (p *pendingTable) unexpect(key Tuple) {
	now := time.Now()
	p.mu.Lock()
	if p.expecting[key]--; p.expecting[key] <= 0 {
		delete(p.expecting, key)
	}
	for k, until := range p.gone {
		if now.After(until) {
			delete(p.gone, k)
		}
	}
	if len(p.gone) < p.n.cfg.MaxPending {
		p.gone[key] = now.Add(p.n.cfg.PendingTimeout)
	}
	e := p.unfileLocked(key)
	p.mu.Unlock()
	if e != nil {
		p.finish(e, DropAborted)
	}
}

// admit says whether an offer for key (canonical) may be filed: expected
// means a pull of this process waits for it; gone means a pull ended and
// the offer must be refused.
func (p *pendingTable) admit(key Tuple) (expected, gone bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until, ok := p.gone[key]; ok && time.Now().Before(until) {
		return false, true
	}
	return p.expecting[key] > 0, false
}

// insert files e under key, or keeps it among the unbound offers when
// key's client port is 0 (unbound.go), and arms its expiry. It returns
// the entry it replaced, and ReasonNone, or why it did not: the table is
// closed or full, it holds the process's share of its fd limit
// (fdshare.go), or e's connector holds its share of it (peers.go).
func (p *pendingTable) insert(key Tuple, e *pendingEntry) (old *pendingEntry, why Reason) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !key.unbound() {
		old = p.m[key]
	}
	held := p.heldLocked()
	if p.closed || (old == nil && held >= p.n.cfg.MaxPending) {
		return nil, ReasonRefused
	}
	if old == nil && (held >= fdShare() || time.Now().Before(p.scarceUntil)) {
		return nil, ReasonFDLimit
	}
	if !p.peers.add(peerOf(&e.match.Request.Cred), peerShare(p.n.cfg.MaxPending)) {
		p.n.stats.peerLimited.Add(1)
		return nil, ReasonRefused
	}
	if old != nil {
		p.unfileLocked(key)
	}
	e.key, e.filed = key, time.Now()
	if key.unbound() {
		p.unbound = append(p.unbound, e)
	} else {
		p.m[key] = e
	}
	p.told()
	e.timer = time.AfterFunc(p.n.cfg.PendingTimeout, func() {
		if p.take(e) {
			p.finish(e, DropExpired)
		}
	})
	return old, ReasonNone
}

// heldLocked returns how many entries the table holds, each with its
// rendezvous connection's fd. p.mu held.
func (p *pendingTable) heldLocked() int { return len(p.m) + len(p.unbound) }

// take removes e if it is still in the table.
func (p *pendingTable) take(e *pendingEntry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.key.unbound() {
		if !p.unlistLocked(e) {
			return false
		}
		p.releaseLocked(e)
		return true
	}
	if p.m[e.key] != e {
		return false
	}
	p.unfileLocked(e.key)
	return true
}

// takeFor takes the entry of the connection key (canonical): filed
// under its exact client address, or under its port alone (a connector
// that bound a wildcard).
func (p *pendingTable) takeFor(key Tuple) *pendingEntry {
	e := p.takeKey(key)
	if e == nil && !key.Client.Addr().IsUnspecified() {
		e = p.takeKey(key.withAnyClient())
	}
	return e
}

func (p *pendingTable) takeKey(key Tuple) *pendingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unfileLocked(key)
}

// unfileLocked removes and returns the entry filed under key (nil:
// none). p.mu held.
func (p *pendingTable) unfileLocked(key Tuple) *pendingEntry {
	e := p.m[key]
	if e != nil {
		delete(p.m, key)
		p.releaseLocked(e)
	}
	return e
}

// releaseLocked ends what e, just taken out of the table, counted: its
// connector's share, and the entries told to OnPending. p.mu held.
func (p *pendingTable) releaseLocked(e *pendingEntry) {
	p.peers.remove(peerOf(&e.match.Request.Cred))
	p.told()
}

// told tells Config.OnPending how many entries are filed (held.go). p.mu
// held.
func (p *pendingTable) told() {
	p.n.held.filed.Store(int32(p.heldLocked()))
	p.n.tellHeld()
}

// finish drops e with cause unless it is already finished.
func (p *pendingTable) finish(e *pendingEntry, cause DropCause) {
	e.mu.Lock()
	now := e.finishLocked(verdictDeclined, cause)
	e.mu.Unlock()
	if now {
		p.dropped(e.match, cause)
	}
}

// dropped counts a drop and tells the caller's OnDrop.
func (p *pendingTable) dropped(m Match, cause DropCause) {
	p.n.stats.drops[cause].Add(1)
	if f := p.n.cfg.OnDrop; f != nil {
		f(m, cause)
	}
}

// finishLocked sends the verdict (best effort: the connector may be gone),
// closes the connection and stops the timer; cause is why a declined
// committed offer's refusal says it was dropped (0 for an accepted one).
// It reports whether e was finished now (false: already finished). e.mu
// held.
func (e *pendingEntry) finishLocked(verdict byte, cause DropCause) bool {
	if e.done {
		return false
	}
	e.done = true
	if e.timer != nil {
		e.timer.Stop()
	}
	switch {
	case e.answer == nil:
		sendByte(e.fd, verdict)
	case verdict == verdictAccepted:
		a, t := e.answer, e.match.Request.Tuple
		m := message{kind: kindAnswer, nfiles: len(a.Files), tuple: t, pid: ownPID, data: a.Data}
		sendFrame(e.fd, m.encode(), a.Files, time.Now().Add(answerSendTimeout))
	default:
		text := errNotClaimed
		if cause == DropUnbound {
			text = errUnboundLate
		}
		m := message{kind: kindRefusal, reason: ReasonRefused, pid: ownPID, data: []byte(text)}
		sendFrame(e.fd, m.encode(), nil, time.Now().Add(answerSendTimeout))
	}
	unix.Close(e.fd)
	e.fd = -1
	return true
}

// answerSendTimeout bounds the send of a committed offer's answer or
// refusal: a small frame into an empty socket buffer, which waits only
// on a connector that filled it against the protocol.
const answerSendTimeout = 10 * time.Millisecond

// errNotClaimed is the text of a committed offer's refusal when its
// entry is dropped.
const errNotClaimed = "the listener process did not claim the connection"

// errUnboundLate is the refusal's text for an unbound offer dropped
// before it was filed under its port (unbound.go): its port came after
// the accept() that took the connection had stopped waiting, or never.
const errUnboundLate = "the listener's accept() took the connection before its port came (unbound offer)"

// scarceFor is how long offers are refused after the program's accept()
// ran out of fds: the program then accepts or closes, and new offers
// would take the fds it frees.
const scarceFor = time.Second

// ReleaseForAccept is for a program's accept() that failed for want of an
// fd (EMFILE, ENFILE): every offer waiting for its accept() gives its fd
// back, and no new one is filed for a while. Kernel TCP holds no fd for a
// connection waiting in a listener's backlog, so the program's own
// accepts come first. The connectors hear "declined" and their
// connections stay on kernel TCP, to be accepted as such. It returns how
// many fds it released (the accept is worth trying again when > 0).
func (n *Node) ReleaseForAccept() int {
	return n.pend.dropAll(DropFDLimit, func(p *pendingTable) { p.scarceUntil = time.Now().Add(scarceFor) })
}

func (p *pendingTable) closeAll() {
	p.dropAll(DropClosed, func(p *pendingTable) { p.closed = true })
}

// dropAll empties the table, after change (made under p.mu), and drops
// every entry it held with cause; it returns how many.
func (p *pendingTable) dropAll(cause DropCause, change func(*pendingTable)) int {
	p.mu.Lock()
	change(p)
	all := p.unbound
	for _, e := range p.m {
		all = append(all, e)
	}
	p.m, p.unbound = map[Tuple]*pendingEntry{}, nil
	p.peers = peerCounts{}
	p.told()
	p.mu.Unlock()
	for _, e := range all {
		p.finish(e, cause)
	}
	return len(all)
}

// Claim is called by accept() with the accepted connection's local and
// remote addresses. It takes the pending offer for that 4-tuple (filed by
// the connector's exact address, or by its port alone when it bound a
// wildcard) and returns it with ReasonNone when the connector committed:
// the connection is then accelerated, and the connector hears
// "accepted". Otherwise the connection stays plain TCP, and the reason
// says why: ReasonNotShimmed, no offer (a plain client, or one that fell
// back for a reason of its own); ReasonConnectorLate, the offer's port
// did not come in time (unbound.go); ReasonTimeout, the offer expired
// before this accept; ReasonPeerGone, the connector gave the connection
// up, and its offer is dropped (OnDrop with DropAborted). Claim never
// blocks on the network; it may wait for an answer still being written
// (bounded by ReadTimeout), and for the ports of unbound offers to its
// address (unbound.go).
func (n *Node) Claim(local, remote netip.AddrPort) (Match, Reason) {
	key := Tuple{Client: remote, Server: local}.canon()
	e := n.pend.takeFor(key)
	why := ReasonNone
	if e == nil {
		e, why = n.find(key)
	}
	if e == nil {
		n.stats.claimMisses.Add(1)
		return Match{}, why
	}
	e.mu.Lock()
	if e.done {
		e.mu.Unlock()
		n.stats.claimMisses.Add(1)
		return Match{}, ReasonTimeout
	}
	// The connector writes the commit byte before its connect(), so when
	// accept() returns the connection the byte is already queued: absent
	// means the connector aborted (closed: EOF) or broke the protocol.
	// After a committed offer only an abort byte may come, from a
	// connector that gave the connection up (Answer.Abort); its end alone
	// is a connector that died or exited after its connect(), whose bytes
	// the connection still delivers.
	b, ok, _ := recvByte(e.fd)
	if (e.answer == nil && ok && b == commitByte) || (e.answer != nil && !ok) {
		e.finishLocked(verdictAccepted, 0)
		e.mu.Unlock()
		n.stats.claims.Add(1)
		return e.match, ReasonNone
	}
	e.finishLocked(verdictDeclined, DropAborted)
	e.mu.Unlock()
	n.pend.dropped(e.match, DropAborted)
	return Match{}, ReasonPeerGone
}
