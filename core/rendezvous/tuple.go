package rendezvous

import "net/netip"

// Tuple is a TCP connection's 4-tuple as the connector sees it: Client is
// the connector's local address after its bind (getsockname), Server the
// destination it is about to connect to. The acceptor sees the same
// connection as local = Server, remote = Client.
//
// Client.Addr() may be unspecified when the connector bound a wildcard
// address: the port alone identifies it then, because a wildcard bind
// reserves the port on every address. A committed offer's Client may
// also have port 0: the connector left its socket unbound, and names the
// port its connect() got afterwards (unbound.go).
type Tuple struct {
	Client, Server netip.AddrPort
}

// canon returns the form used for comparisons: v4-mapped v6 addresses
// unmapped, zones dropped, and every unspecified address (0.0.0.0 or ::)
// written as ::.
func canon(ap netip.AddrPort) netip.AddrPort {
	a := ap.Addr().Unmap().WithZone("")
	if a.IsUnspecified() {
		a = netip.IPv6Unspecified()
	}
	return netip.AddrPortFrom(a, ap.Port())
}

func (t Tuple) canon() Tuple {
	return Tuple{Client: canon(t.Client), Server: canon(t.Server)}
}

// Canon returns t in the form its comparisons use (canon): a map key for
// the same connection whichever way its addresses were written.
func (t Tuple) Canon() Tuple { return t.canon() }

// withAnyClient returns t with the client address replaced by the
// wildcard, the key a connector that bound a wildcard address files under.
func (t Tuple) withAnyClient() Tuple {
	return Tuple{Client: netip.AddrPortFrom(netip.IPv6Unspecified(), t.Client.Port()), Server: t.Server}
}

// valid reports whether t can name a connection: both ports set, a server
// address given.
func (t Tuple) valid() bool {
	return t.Client.Port() != 0 && t.Server.Port() != 0 &&
		t.Client.Addr().IsValid() && t.Server.Addr().IsValid() &&
		!t.Server.Addr().IsUnspecified()
}

// unbound reports whether t leaves the client's port to the kernel's
// connect(): an unbound offer's tuple (unbound.go).
func (t Tuple) unbound() bool { return t.Client.Port() == 0 }

// validOffer reports whether t may name an offered connection: valid,
// or (committed) unbound with a server address given.
func (t Tuple) validOffer(committed bool) bool {
	if committed && t.unbound() {
		return Tuple{Client: netip.AddrPortFrom(t.Client.Addr(), 1), Server: t.Server}.valid()
	}
	return t.valid()
}

func (t Tuple) String() string {
	return t.Client.String() + "->" + t.Server.String()
}
