package shim

import "github.com/sdpshim/sdpshim/core/rendezvous"

// Accepts the interposer decides alone (preload/c/plainaccept.c). An
// accept on a registered listener enters the core to learn whether the
// connection was offered; for a server whose clients are not shimmed the
// answer is always no, at the cost of a runtime entry per connection
// (about 0.1 ms in a postgres postmaster, which forks a backend right
// after, with the runtime threads that entry woke still running). So the
// core tells the interposer enough to answer "nobody offered it" alone:
// the listeners it registered (marked with their SO_COOKIE), how many
// offers it holds unclaimed (rendezvous Config.OnPending), and, after an
// accept that nobody offered, its rendezvous socket and the state in
// which the record directory held no deferral record (rendezvous
// Node.Quiet). A connector's offer is answered or queued on that socket
// (a committed offer), and its record written, before its connect(): an
// accept on a marked listener while nothing is queued there, no offer is
// held and the directory is still in that state is a plain connection
// (held.go in core/rendezvous says why the order of these looks matters),
// which the interposer counts
// (peer-not-shimmed, added to the registry's count through
// Observer.InterposerFallbacks), fires through the probe and logs. It
// does not appear in the registry's list of recent fallbacks.

// plainAcceptHost is a Host whose interposer decides those accepts.
type plainAcceptHost interface {
	// DecidesPlainAccepts reports whether the methods below do anything
	// (an older interposer lacks them).
	DecidesPlainAccepts() bool
	// AcceptListener marks listener fd, whose SO_COOKIE is cookie (0
	// unmarks fd).
	AcceptListener(fd int, cookie uint64)
	// AcceptHeld tells how many offers this process holds unclaimed.
	AcceptHeld(n int)
	// AcceptQuiet tells a state in which the record directory dir (the
	// run directory's records/) held no deferral record, and the
	// rendezvous socket rvfd, where a committed offer waits until the
	// core reads it (AcceptHeld counts it from then on).
	AcceptQuiet(dir string, st rendezvous.DirState, rvfd int)
}

// plainHost returns the host as a plainAcceptHost, or nil.
func (p *Process) plainHost() plainAcceptHost {
	if h, ok := p.host.(plainAcceptHost); ok && h.DecidesPlainAccepts() {
		return h
	}
	return nil
}

// markListenerLocked marks s's registered fd for plain accepts.
//
// +checklocks:s.mu
func (p *Process) markListenerLocked(s *Socket, fd int) {
	h := p.plainHost()
	if h == nil || s.plainMark != 0 {
		return
	}
	if cookie := socketCookie(fd); cookie != 0 {
		h.AcceptListener(fd, cookie)
		s.plainMark = fd + 1
	}
}

// unmarkListenerLocked withdraws s's mark.
//
// +checklocks:s.mu
func (p *Process) unmarkListenerLocked(s *Socket) {
	if s.plainMark == 0 {
		return
	}
	if h := p.plainHost(); h != nil {
		h.AcceptListener(s.plainMark-1, 0)
	}
	s.plainMark = 0
}

// offersHeld is the node's OnPending, set only with a plainAcceptHost: how
// many offers wait for a Claim.
func (p *Process) offersHeld(n int) {
	p.plainMu.Lock()
	defer p.plainMu.Unlock()
	p.plainOffers = n
	p.plainHost().AcceptHeld(p.plainOffers + p.plainSlabs)
}

// peerSlabsMapped is the area pool's onPeers, set only with a
// plainAcceptHost. A peer's slab mapped here may hold a posted offer
// (post.go), which only the core looks for: the interposer decides no
// accept alone while one is mapped (it counts as a held offer), which
// is until the reaper lets it go, a second after the peer's last
// connection here closed (reap.go).
func (p *Process) peerSlabsMapped(n int) {
	p.plainMu.Lock()
	defer p.plainMu.Unlock()
	p.plainSlabs = n
	p.plainHost().AcceptHeld(p.plainOffers + p.plainSlabs)
}

// notOffered follows an accept nobody offered: the interposer learns the
// record directory's state when it holds no record, and the rendezvous
// socket. (A state that moved since, or has records, is not told: the
// one the interposer holds then differs from the directory's, and it asks
// the core.)
func (p *Process) notOffered(node *rendezvous.Node) {
	if h := p.plainHost(); h != nil {
		if st, ok := node.Quiet(); ok {
			if fd := node.ServerFD(); fd >= 0 {
				h.AcceptQuiet(node.RecordDir(), st, fd)
			}
		}
	}
}
