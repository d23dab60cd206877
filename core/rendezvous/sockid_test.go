package rendezvous

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/sockdiag"
)

// tcpListener listens on a loopback port of its own and returns its fd
// and address.
func tcpListener(t *testing.T) (int, netip.AddrPort) {
	t.Helper()
	fd := tcpSocket(t)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	return fd, sockaddrAP(sa)
}

// accepted is a connection as accept() gives it: the accepted socket's
// local and remote addresses.
type accepted struct{ local, remote netip.AddrPort }

// connectAll connects each socket to dst (the kernel completes a
// loopback connection within connect()), accepts them all on the
// listener lfd, and returns each one's accepted end, in the order of
// socks.
func connectAll(t *testing.T, lfd int, dst netip.AddrPort, socks ...int) []accepted {
	t.Helper()
	byPort := map[uint16]accepted{}
	for _, fd := range socks {
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil {
			t.Fatal(err)
		}
		afd, rsa, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(afd) })
		lsa, _ := unix.Getsockname(afd)
		a := accepted{local: sockaddrAP(lsa), remote: sockaddrAP(rsa)}
		byPort[a.remote.Port()] = a
	}
	out := make([]accepted, len(socks))
	for i, fd := range socks {
		sa, _ := unix.Getsockname(fd)
		out[i] = byPort[sockaddrAP(sa).Port()]
	}
	return out
}

// needSockDiag skips the test where the kernel's socket diagnostics
// cannot say whose a connection is.
func needSockDiag(t *testing.T, a accepted) {
	t.Helper()
	if _, _, err := sockdiag.Peer(a.local, a.remote); errors.Is(err, sockdiag.ErrUnsupported) {
		t.Skipf("no socket diagnostics: %v", err)
	}
}

// The kernel says whose a connection is. A claim that comes before its
// unbound offer's frame waits for that frame past unboundWait, as long
// as a starved connector may take; the claim of another connection to
// the same address, made while that offer is unbound, waits for nothing.
func TestUnboundOfferKnownBySocket(t *testing.T) {
	checkNoLeak(t)
	lfd, dst := tcpListener(t)
	p := newPairAt(t, Config{}, dst)
	cfd, plain := tcpSocket(t), tcpSocket(t)
	a, err := p.c.OfferCommitted(p.entry, p.unboundTuple(), Payload{Data: []byte("k")}, cfd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); a.Payload.CloseFiles() })
	conns := connectAll(t, lfd, dst, cfd, plain)
	needSockDiag(t, conns[0])

	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second // what a claim would wait for an offer it cannot place
	began := time.Now()
	if _, why := p.l.Claim(conns[1].local, conns[1].remote); why != ReasonNotShimmed {
		t.Fatalf("the plain connection's claim: %v", why)
	}
	if took := time.Since(began); took > unboundWait/2 {
		t.Fatalf("the plain connection's claim waited %v for another connection's offer", took)
	}

	unboundWait = time.Millisecond // the own offer's wait is not this one
	go func() {
		time.Sleep(50 * time.Millisecond) // a connector that lost its CPU after connect()
		a.Bound(conns[0].remote)
	}()
	m, why := p.l.Claim(conns[0].local, conns[0].remote)
	if why != ReasonNone {
		t.Fatalf("the offer's own connection: %v", why)
	}
	m.Prepared.(*prepared).release()
	if m.Request.Tuple.canon() != (Tuple{Client: conns[0].remote, Server: conns[0].local}).canon() {
		t.Fatalf("claimed as %s", m.Request.Tuple)
	}
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		t.Fatalf("verdict %s (%v)", v, a.Refusal())
	}
}

// The same for deferral records: the acceptor waits for the rename of
// the pending record whose socket is its connection's, past unboundWait,
// and for nothing when the pending record is another connection's.
func TestUnboundRecordKnownBySocket(t *testing.T) {
	lfd, dst := tcpListener(t)
	conn, puller, _ := deferPair(t, nil)
	cfd, plain := tcpSocket(t), tcpSocket(t)
	d, err := conn.Defer(Tuple{Client: ap("0.0.0.0:0"), Server: dst}, cfd)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Undefer(d)
	conns := connectAll(t, lfd, dst, cfd, plain)
	needSockDiag(t, conns[0])

	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second
	began := time.Now()
	if _, err := puller.FindDeferred(conns[1].local, conns[1].remote); ReasonOf(err) != ReasonNotShimmed {
		t.Fatalf("the plain connection: %v", err)
	}
	if took := time.Since(began); took > unboundWait/2 {
		t.Fatalf("the plain connection waited %v for another connection's record", took)
	}

	unboundWait = time.Millisecond
	bound := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		bound <- conn.BindDeferred(&d, conns[0].remote)
	}()
	rec, err := puller.FindDeferred(conns[0].local, conns[0].remote)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	if rec.Nonce != d.Nonce || rec.Tuple != d.Tuple {
		t.Fatalf("record %+v, deferral %+v", rec, d)
	}
}
