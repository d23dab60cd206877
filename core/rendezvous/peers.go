package rendezvous

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// Shares per peer process. The rendezvous socket's slots (connections
// being served, MaxConns) and the pending table (offers waiting for their
// Claim, MaxPending) are bounded; without shares one process that opens
// connections to the socket and never finishes them, or files offers it
// never connects, would fill them and turn acceleration off for every
// other process while it lasts. No peer process may hold more than half of
// either: beyond that its new connections and offers are refused (it
// falls back, reason rendezvous-refused) while other processes still get
// in. Half leaves a busy but honest client (a load generator opening
// dozens of connections at once) room, and a flooder room for no more
// than it.
//
// A peer is the process SO_PEERCRED names. A process of another pid
// namespace that this one cannot see has pid 0 there: such peers share
// one share per uid.

// peerKey identifies a peer process: its pid, or, for a pid this process
// cannot see (0), its uid negated less one.
type peerKey int64

func peerOf(c *unix.Ucred) peerKey {
	if c.Pid > 0 {
		return peerKey(c.Pid)
	}
	return -peerKey(c.Uid) - 1
}

// peerShare is what one peer may hold of limit.
func peerShare(limit int) int { return max(limit/2, 1) }

// errPeerShare is a refusal's text when a peer holds its share.
var errPeerShare = errors.New("this process holds its share of the listener's rendezvous already")

// peerCounts counts what each peer holds. Safe for concurrent use.
type peerCounts struct {
	mu sync.Mutex
	m  map[peerKey]int
}

// add counts one more for peer unless it holds share already.
func (c *peerCounts) add(peer peerKey, share int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[peerKey]int{}
	}
	if c.m[peer] >= share {
		return false
	}
	c.m[peer]++
	return true
}

// remove counts one fewer for peer.
func (c *peerCounts) remove(peer peerKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[peer]--; c.m[peer] <= 0 {
		delete(c.m, peer)
	}
}
