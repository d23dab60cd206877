package rendezvous

import (
	"sync"
	"sync/atomic"
)

// What Config.OnPending is told: how many offers this process may hold
// that no Claim took yet. That is the offers filed in the pending table,
// and the rendezvous connections the server took off its socket and has
// not finished with (one more while an intake accepts), whose request may
// be an offer on its way to the table. A committed offer (OfferCommitted)
// is sent before its connector's connect() and filed only once the
// server reads it, so an accept() that comes before that finds it either
// still queued on the rendezvous socket (ServerFD) or counted here: the
// count is told before the accept that takes the connection off the
// socket's backlog, and drops only after the offer is filed. The
// interposer's plain accepts (shim/plainaccept.go) look at both.
type heldCount struct {
	filed    atomic.Int32 // entries in the pending table
	inflight atomic.Int32 // connections taken from the socket, not finished
	mu       sync.Mutex   // one telling at a time: the last one told the latest sum
}

// tellHeld tells OnPending the count as it is now.
func (n *Node) tellHeld() {
	f := n.cfg.OnPending
	if f == nil {
		return
	}
	n.held.mu.Lock()
	defer n.held.mu.Unlock()
	f(int(n.held.filed.Load() + n.held.inflight.Load()))
}

// inflight adds d to the connections in flight and tells the count.
func (n *Node) inflight(d int32) {
	n.held.inflight.Add(d)
	n.tellHeld()
}

// ServerFD returns the rendezvous server's listening socket (a protected
// fd), or -1 before the first Register or Serve.
func (n *Node) ServerFD() int {
	if srv := n.server(); srv != nil {
		return srv.fd
	}
	return -1
}

// server returns the rendezvous server, nil before the first Register or
// Serve.
func (n *Node) server() *server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}
