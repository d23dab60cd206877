package rendezvous

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unboundTuple is p's tuple with the client's port left to connect().
func (p *pair) unboundTuple() Tuple {
	return Tuple{Client: netip.AddrPortFrom(netip.IPv4Unspecified(), 0), Server: p.dst}
}

// An unbound offer is claimed under the port its bound frame names,
// whether the frame came before the claim or while the claim waited for
// it; the answer carries the bound 4-tuple.
func TestUnboundOfferClaimed(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	for i, late := range []bool{false, true} {
		tu := p.tuple(uint16(43000 + i))
		a := p.committed(t, p.unboundTuple(), "u")
		if !late {
			if err := a.Bound(tu.Client); err != nil {
				t.Fatal(err)
			}
		} else {
			// The claim comes first (the kernel completed the connection
			// inside the connector's connect()), the frame 5 ms after;
			// the claim's wait is made long enough that a loaded machine
			// cannot make the frame miss it.
			defer func(w time.Duration) { unboundWait = w }(unboundWait)
			unboundWait = 10 * time.Second
			go func() {
				time.Sleep(5 * time.Millisecond)
				a.Bound(tu.Client)
			}()
		}
		m, ok := p.claim(tu)
		if !ok {
			t.Fatalf("late %v: not claimed", late)
		}
		m.Prepared.(*prepared).release()
		if m.Request.Tuple.canon() != tu.canon() {
			t.Fatalf("late %v: claimed as %s", late, m.Request.Tuple)
		}
		if v := a.WaitVerdict(guard); v != VerdictAccepted {
			t.Fatalf("late %v: verdict %s (%v)", late, v, a.Refusal())
		}
	}
}

// Many unbound offers to one address, bound in the reverse order, each
// claimed right after its frame: every claim takes its own.
func TestUnboundOffersMany(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	const n = 50
	var as [n]*Answer
	for i := range as {
		as[i] = p.committed(t, p.unboundTuple(), "m")
	}
	for i := n - 1; i >= 0; i-- {
		tu := p.tuple(uint16(43100 + i))
		if err := as[i].Bound(tu.Client); err != nil {
			t.Fatal(err)
		}
		m, ok := p.claim(tu)
		if !ok {
			t.Fatalf("offer %d not claimed", i)
		}
		m.Prepared.(*prepared).release()
		if v := as[i].WaitVerdict(guard); v != VerdictAccepted {
			t.Fatalf("offer %d: verdict %s", i, v)
		}
	}
}

// A claim that waited in vain for an unbound offer's port leaves its
// connection plain; the offer's frame, when it comes after, is declined,
// so both sides agree that connection is plain. A plain client's claim
// with no unbound offer around does not wait at all.
func TestUnboundOfferTooLate(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(43200)
	a := p.committed(t, p.unboundTuple(), "l")
	begin := time.Now()
	if _, ok := p.claim(tu); ok {
		t.Fatal("claimed without the port")
	}
	if waited := time.Since(begin); waited < unboundWait {
		t.Fatalf("the claim waited %v for the unbound offer, want %v", waited, unboundWait)
	}
	if err := a.Bound(tu.Client); err != nil {
		t.Fatal(err)
	}
	// The next claim (another connection) reads the frame and drops it.
	if _, ok := p.claim(p.tuple(43201)); ok {
		t.Fatal("claimed another 4-tuple")
	}
	if v := a.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("verdict %s", v)
	}
	wantReason(t, a.Refusal(), ReasonRefused)
	if !strings.Contains(a.Refusal().Error(), errUnboundLate) {
		t.Fatalf("refusal %v, want the unbound offer's text", a.Refusal())
	}
	if c := p.drops.wait(t); c != DropUnbound {
		t.Fatalf("drop %s", c)
	}
	// No offer is unbound now, so a plain connection's claim has none to
	// wait for: it returns at once (find), which a longer wait shows.
	defer func(w time.Duration) { unboundWait = w }(unboundWait)
	unboundWait = 10 * time.Second
	begin = time.Now()
	if _, ok := p.claim(p.tuple(43202)); ok {
		t.Fatal("a plain connection claimed")
	}
	if waited := time.Since(begin); waited >= unboundWait {
		t.Fatalf("a claim with no unbound offer waited %v", waited)
	}
}

// An unbound offer withdrawn before its port (the connect() failed), or
// whose connector went before it, is dropped and never claimed; a bound
// frame for another server, or garbage, drops it too.
func TestUnboundOfferDropped(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	a := p.committed(t, p.unboundTuple(), "x")
	a.Abort()
	gone := p.committed(t, p.unboundTuple(), "y")
	gone.Close()
	if _, ok := p.claim(p.tuple(43300)); ok {
		t.Fatal("claimed")
	}
	seen := map[DropCause]int{}
	for range 2 {
		seen[p.drops.wait(t)]++
	}
	if seen[DropAborted] != 1 || seen[DropUnbound] != 1 {
		t.Fatalf("drops %v, want one aborted and one unbound", seen)
	}

	for i, frame := range [][]byte{
		(message{kind: kindBound, tuple: Tuple{Client: ap("127.0.0.1:43301"), Server: ap("127.0.0.1:5999")}}).encode(),
		(message{kind: kindBound, tuple: Tuple{Client: ap("127.0.0.1:0"), Server: ap("127.0.0.1:5000")}}).encode(),
		(message{kind: kindAnswer, tuple: p.tuple(43301)}).encode(),
		[]byte("not a frame of any kind, but long enough to be read as one"),
	} {
		h := p.committed(t, p.unboundTuple(), "h")
		h.g.mu.Lock()
		unix.Write(h.g.fd, frame)
		h.g.mu.Unlock()
		if _, ok := p.claim(p.tuple(43301)); ok {
			t.Fatalf("frame %d: claimed", i)
		}
		if v := h.WaitVerdict(guard); v != VerdictDeclined {
			t.Fatalf("frame %d: verdict %s", i, v)
		}
		if c := p.drops.wait(t); c != DropUnbound {
			t.Fatalf("frame %d: drop %s", i, c)
		}
	}
}
