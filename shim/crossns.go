package shim

import (
	"errors"
	"net/netip"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Connections between network namespaces of one host (pods). Ports repeat
// across namespaces, so a connector whose peer is in another namespace
// names its side of the 4-tuple by a specific address: it binds the
// source address its route to the destination uses (bindSource), which
// is what the acceptor's getpeername sees. Two cases:
//
//   - The destination is an address of the listener's namespace (a pod's
//     address; rendezvous.Entry.OtherNetns): the offer goes before the
//     connect, as within a namespace.
//   - The destination is a service address that a NAT rewrites
//     (SDPSHIM_SERVICES): the connector cannot know the listener, so it
//     defers with a record filed by its source alone
//     (rendezvous.Node.DeferNAT) and the acceptor, whose accept() finds
//     that record under the peer address it sees, pulls the connection
//     at its first use (deferred.go, deferred_accept.go).

var errNoRoute = errors.New("no route source address")

// bindSource binds the unbound socket fd to the source address of its
// route to dst and an ephemeral port, and returns the local address. A
// socket the program bound already keeps its binding; a wildcard address
// is then replaced by the route's source in the result (the kernel picks
// that address at connect).
func bindSource(fd, family int, dst netip.AddrPort) (netip.AddrPort, error) {
	local, err := sockName(fd)
	if err != nil {
		return local, err
	}
	if local.Port() != 0 && !local.Addr().IsUnspecified() {
		return local, nil
	}
	src, ok := routeSource(dst.Addr())
	if !ok {
		return local, errNoRoute
	}
	if local.Port() != 0 {
		return netip.AddrPortFrom(src, local.Port()), nil
	}
	var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: src.As4()}
	if family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{Addr: netip.AddrFrom16(src.As16()).As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return local, err
	}
	local, err = sockName(fd)
	return netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), err
}

// routeSource returns the source address the kernel's route to a uses,
// asked with a connected UDP socket (which sends nothing).
func routeSource(a netip.Addr) (netip.Addr, bool) {
	a = a.Unmap()
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: 9, Addr: a.As16()})
	if a.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: 9, Addr: a.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return netip.Addr{}, false
	}
	defer unix.Close(fd)
	if unix.Connect(fd, sa) != nil {
		return netip.Addr{}, false
	}
	local, err := sockName(fd)
	if err != nil || local.Addr().IsUnspecified() {
		return netip.Addr{}, false
	}
	return local.Addr().Unmap(), true
}

// connectServiceLocked connects fd to dst, a service address a NAT may
// forward to a shimmed listener in another network namespace of this
// host: a deferred connection filed by its source (bound here). It
// returns what Connect returns; Pass (plain) when no listener of another
// namespace is registered at all (nothing on this host could pull it) or
// the source cannot be bound.
//
// +checklocks:s.mu
func (s *Socket) connectServiceLocked(fd int, node *rendezvous.Node, dst netip.AddrPort, raw []byte, fields logrus.Fields) int64 {
	p := s.p
	if !node.ListenersElsewhere() {
		p.fallback(rendezvous.ReasonNotShimmed, fd, fields, errNoListenerElsewhere)
		s.fallBackLocked()
		return Pass
	}
	local, err := bindSource(fd, s.family, dst)
	if err != nil {
		p.fallback(rendezvous.ReasonUnsupportedOption, fd, fields, err)
		s.fallBackLocked()
		return Pass
	}
	fields["local"] = local
	return s.connectDeferredLocked(fd, node, rendezvous.Tuple{Client: local, Server: dst}, raw, fields, true)
}

var errNoListenerElsewhere = errors.New("service address, but no shimmed listener in another network namespace")
