package rendezvous

import "sync/atomic"

// Stats is a snapshot of a Node's counters, all monotonic.
type Stats struct {
	// Lookup.
	StaleEntries   uint64 // entries of dead or reused pids, removed
	GarbageEntries uint64 // unparseable entry files, removed
	Removed        uint64 // files of dead processes removed (entries, records, sockets, temporaries)
	// Connector side.
	Offers         uint64 // Offer calls
	OffersAnswered uint64 // positive answers received (a committed offer's at its claim)
	Fallbacks      [numReasons]uint64
	// Listener side.
	Conns         uint64 // rendezvous connections accepted
	Overloaded    uint64 // closed at once: too many connections
	PeerLimited   uint64 // connections and offers refused: their process held its share (peers.go)
	UIDRejected   uint64 // SO_PEERCRED uid not allowed
	BadRequests   uint64 // malformed requests (garbage, sizes, fds)
	ReadTimeouts  uint64 // request not complete before the deadline
	Refused       uint64 // refusals for any reason
	Answered      uint64 // positive answers sent
	HandlerPanics uint64
	Claims        uint64 // accept() matched a committed offer
	ClaimMisses   uint64 // accept() found no entry (a plain client)
	Drops         [DropUnbound + 1]uint64
	// Deferred acceptance (deferred.go, pull.go).
	Deferred     uint64 // records written (connector)
	Pulls        uint64 // Pull calls (first user)
	PullsClaimed uint64 // Pulls that ended accelerated
	PullsServed  uint64 // PULLs received (connector)
}

// Fallback returns the count of Offer or Lookup failures with reason r.
func (s *Stats) Fallback(r Reason) uint64 {
	if r < numReasons {
		return s.Fallbacks[r]
	}
	return 0
}

type counters struct {
	staleEntries, garbageEntries, removed          atomic.Uint64
	offers, offersAnswered                         atomic.Uint64
	fallbacks                                      [numReasons]atomic.Uint64
	conns, overloaded, uidRejected, badRequests    atomic.Uint64
	peerLimited                                    atomic.Uint64
	readTimeouts, refused, answered, handlerPanics atomic.Uint64
	claims, claimMisses                            atomic.Uint64
	drops                                          [DropUnbound + 1]atomic.Uint64
	deferred, pulls, pullsClaimed, pullsServed     atomic.Uint64
}

func (c *counters) fallback(err error) {
	if r := ReasonOf(err); r < numReasons {
		c.fallbacks[r].Add(1)
	}
}

func (c *counters) snapshot() Stats {
	s := Stats{
		StaleEntries:   c.staleEntries.Load(),
		GarbageEntries: c.garbageEntries.Load(),
		Removed:        c.removed.Load(),
		Offers:         c.offers.Load(),
		OffersAnswered: c.offersAnswered.Load(),
		Conns:          c.conns.Load(),
		Overloaded:     c.overloaded.Load(),
		PeerLimited:    c.peerLimited.Load(),
		UIDRejected:    c.uidRejected.Load(),
		BadRequests:    c.badRequests.Load(),
		ReadTimeouts:   c.readTimeouts.Load(),
		Refused:        c.refused.Load(),
		Answered:       c.answered.Load(),
		HandlerPanics:  c.handlerPanics.Load(),
		Claims:         c.claims.Load(),
		ClaimMisses:    c.claimMisses.Load(),
		Deferred:       c.deferred.Load(),
		Pulls:          c.pulls.Load(),
		PullsClaimed:   c.pullsClaimed.Load(),
		PullsServed:    c.pullsServed.Load(),
	}
	for i := range s.Fallbacks {
		s.Fallbacks[i] = c.fallbacks[i].Load()
	}
	for i := range s.Drops {
		s.Drops[i] = c.drops[i].Load()
	}
	return s
}
