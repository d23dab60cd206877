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
type shortConns struct {
	mu  sync.Mutex
	dst map[netip.AddrPort]*shortHistory // +checklocks:mu
}

// shortHistory is what one destination's accelerated connections did.
type shortHistory struct {
	streak int   // accelerated connections in a row that were short
	skip   int   // connections still to keep plain before the next probe
	run    int   // how many the next plain run keeps
	probe  int64 // when the probe still open went out (nowNS), or 0
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
	case h == nil || h.streak < shortStreak && h.skip == 0:
		return false, false // nothing known, or the streak still building
	case h.skip > 0:
		h.skip--
		return true, false
	case h.probe != 0 && now-h.probe < shortProbeLong:
		return true, false // the probe's answer is awaited
	case h.probe != 0:
		*h = shortHistory{run: shortRunMin} // it lived: afresh
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
		return
	}
	h.streak++
	if h.skip > 0 || h.streak < shortStreak {
		return // a plain run under way (this one opened before it), or not enough yet
	}
	h.skip = h.run
	h.run = min(2*h.run, shortRunMax)
}
