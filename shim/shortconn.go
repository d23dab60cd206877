package shim

import (
	"net/netip"
	"sync"
	"time"
)

// Short-lived connections. Setting a connection up costs far more under
// the shim than on kernel TCP (docs/direct.md: about 1.3 ms against 0.06,
// more when a pre-fork server's child must start a core of its own to
// take it), and a connection that carries one request cannot win that
// back. A program that connects per request to the same server (a web
// worker to its database, pgbench -C) would pay it on every request. So
// the connecting process keeps, per destination, whether its last
// accelerated connections there were short: closed within shortFactor
// times what their setup took. Once shortStreak in a row were, new
// connections to it stay on kernel TCP (reason short-lived), and
// every so often one is accelerated again to see whether that still
// holds: after 8 plain connections, then 16, doubling to 256 while the
// probes stay short; a probe that is not short starts the count afresh.
// One probe at a time: while it is open the next connections stay plain
// too (a program with four connections open at once accelerated four,
// and against a pre-fork server each costs a core started in the child
// that takes it), until it closes or has lived shortProbeLong, which no
// short connection does (the count then starts afresh).
// SDPSHIM_SHORT_CONN=0 turns this off.
//
// The plain runs themselves are the interposer's (shortRunHost,
// preload/c/shortconn.c): a connect it can keep plain without the core
// costs no runtime entry at all, which is the point of keeping it plain.
type shortConns struct {
	mu   sync.Mutex
	dst  map[netip.AddrPort]*shortHistory // +checklocks:mu
	runs shortRuns                        // the plain runs: the host's, or ownRuns (init)
}

// shortHistory is what one destination's accelerated connections did.
type shortHistory struct {
	streak int   // accelerated connections in a row that were short
	run    int   // how many the next plain run keeps
	probe  int64 // when the probe still open went out (nowNS), or 0
}

// shortRuns holds the plain runs: how many of the next connections to a
// destination stay on kernel TCP.
type shortRuns interface {
	// ShortRun keeps the next n connections to dst on kernel TCP (0 ends
	// the run); false when there is no room for it (nothing is kept).
	// Called with shortConns.mu held: one writer at a time.
	ShortRun(dst netip.AddrPort, n int) bool
	// ShortLeft is how many connections of dst's run are left.
	ShortLeft(dst netip.AddrPort) int
	// ShortTake takes one connection of dst's run: true when there was
	// one. Called with shortConns.mu held (the interposer's own takes,
	// for sockets the core never saw, race it without harm).
	ShortTake(dst netip.AddrPort) bool
}

// shortRunHost is a Host whose interposer keeps the plain runs and takes
// their connects without the core (a socket the core never saw).
type shortRunHost interface {
	shortRuns
	// KeepsShortRuns reports whether the methods above do anything (an
	// older interposer lacks them).
	KeepsShortRuns() bool
}

// ownRuns are plain runs kept here, for a host without shortRunHost.
// Every method is called with shortConns.mu held.
type ownRuns map[netip.AddrPort]int

func (r ownRuns) ShortRun(dst netip.AddrPort, n int) bool {
	if n <= 0 {
		delete(r, dst)
	} else {
		r[dst] = n
	}
	return true
}

func (r ownRuns) ShortLeft(dst netip.AddrPort) int { return r[dst] }

func (r ownRuns) ShortTake(dst netip.AddrPort) bool {
	if r[dst] == 0 {
		return false
	}
	r.ShortRun(dst, r[dst]-1)
	return true
}

// init sets where the runs are kept, from the process's host.
func (c *shortConns) init(h Host) {
	if rh, ok := h.(shortRunHost); ok && rh.KeepsShortRuns() {
		c.runs = rh
	} else {
		c.runs = ownRuns{}
	}
}

const (
	shortFactor  = 10 // short: closed within this many times its setup
	shortStreak  = 8  // short ones in a row before the next ones stay plain
	shortRunMin  = 8  // the first plain run
	shortRunMax  = 256
	maxShortDsts = 1024 // destinations remembered
	// shortProbeLong: a probe open this long is no short connection.
	shortProbeLong = int64(time.Second)
)

// plain reports whether a new connection to dst at now (nowNS) stays on
// kernel TCP, counting it against the plain run, and whether it is the
// probe (accelerated: its close must reach record or probeEnded).
func (c *shortConns) plain(dst netip.AddrPort, now int64) (plain, probe bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.dst[dst]
	switch {
	case h == nil:
		return false, false // nothing known
	case c.runs.ShortTake(dst):
		return true, false
	case h.streak < shortStreak:
		return false, false // the streak still building
	case h.probe != 0 && now-h.probe < shortProbeLong:
		return true, false // the probe's answer is awaited
	case h.probe != 0:
		*h = shortHistory{run: shortRunMin} // it lived: afresh (no run is under way)
		return false, false
	}
	h.probe = now
	return false, true
}

// probeEnded forgets the probe to dst, which closed without being
// accelerated (nothing to judge): the next connection probes.
func (c *shortConns) probeEnded(dst netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.dst[dst]; h != nil {
		h.probe = 0
	}
}

// record judges one accelerated connection to dst when it closes: setup
// is how long connect() took to make it accelerated, life how long it
// lived after; probe says whether it was the probe.
func (c *shortConns) record(dst netip.AddrPort, setup, life time.Duration, probe bool) {
	short := life < shortFactor*setup
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.dst[dst]
	if h != nil && probe {
		h.probe = 0
	}
	if h == nil {
		if !short {
			return // nothing to remember
		}
		if len(c.dst) >= maxShortDsts {
			for k := range c.dst { // forget any one
				delete(c.dst, k)
				c.runs.ShortRun(k, 0)
				break
			}
		}
		if c.dst == nil {
			c.dst = map[netip.AddrPort]*shortHistory{}
		}
		h = &shortHistory{run: shortRunMin}
		c.dst[dst] = h
	}
	if !short {
		*h = shortHistory{run: shortRunMin}
		c.runs.ShortRun(dst, 0)
		return
	}
	h.streak++
	if h.streak < shortStreak || c.runs.ShortLeft(dst) > 0 {
		return // not enough yet, or a plain run under way (this one opened before it)
	}
	if c.runs.ShortRun(dst, h.run) { // else no room: the next connection probes, the run stays as long
		h.run = min(2*h.run, shortRunMax)
	}
}
