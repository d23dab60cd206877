package rendezvous

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// committed sends a committed offer of data for tu and returns its Answer
// (closed at the test's end).
func (p *pair) committed(t *testing.T, tu Tuple, data string) *Answer {
	t.Helper()
	a, err := p.c.OfferCommitted(p.entry, tu, Payload{Data: []byte(data)}, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); a.Payload.CloseFiles() })
	return a
}

// A committed offer waits for no answer: the claim answers it, and that
// answer is the verdict with the Handler's payload.
func TestCommittedOfferClaimed(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(41000)
	a := p.committed(t, tu, "c")
	if v := a.Verdict(); v != VerdictPending {
		t.Fatalf("verdict before the claim: %s", v)
	}
	if err := a.Commit(); err != nil {
		t.Fatalf("commit of a committed offer: %v", err)
	}
	m, ok := p.claim(tu)
	if !ok {
		t.Fatal("not claimed")
	}
	m.Prepared.(*prepared).release()
	if string(m.Request.Payload.Data) != "c" {
		t.Fatalf("match %+v", m.Request)
	}
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		t.Fatalf("verdict %s", v)
	}
	if string(a.Payload.Data) != "re:c" || len(a.Payload.Files) != 1 {
		t.Fatalf("answer %q, %d files", a.Payload.Data, len(a.Payload.Files))
	}
	if a.Refusal() != nil {
		t.Fatalf("refusal %v", a.Refusal())
	}
	if s := p.c.Stats(); s.Offers != 1 || s.OffersAnswered != 1 {
		t.Fatalf("connector's stats %+v", s)
	}
}

// A claim that comes before the listener's server served the offer takes
// it itself. The offer is sent and claimed at once, many times: each must
// be found whichever of the server and the claim gets to it first.
func TestCommittedOfferClaimedAtOnce(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	for i := range 500 {
		tu := p.tuple(uint16(42000 + i))
		a, err := p.c.OfferCommitted(p.entry, tu, Payload{Data: []byte("n")}, -1)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := p.claim(tu)
		if !ok {
			a.Close()
			t.Fatalf("offer %d: not found by the claim right after it", i)
		}
		m.Prepared.(*prepared).release()
		if v := a.WaitVerdict(guard); v != VerdictAccepted {
			t.Fatalf("offer %d: verdict %s", i, v)
		}
		a.Close()
		a.Payload.CloseFiles()
	}
}

// A connector that withdraws its committed offer (Abort) is not claimed;
// one that only closes (it died after its connect) still is: its bytes
// are in what the offer carried.
func TestCommittedOfferAbortAndDeath(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(41001)
	a := p.committed(t, tu, "a")
	a.Abort()
	if _, ok := p.claim(tu); ok {
		t.Fatal("withdrawn offer claimed")
	}
	if c := p.drops.wait(t); c != DropAborted {
		t.Fatalf("drop %s", c)
	}

	tu = p.tuple(41002)
	dead := p.committed(t, tu, "d")
	dead.Close()
	m, ok := p.claim(tu)
	if !ok {
		t.Fatal("the offer of a connector that died was not claimed")
	}
	m.Prepared.(*prepared).release()
}

// A committed offer the listener cannot take (no listener on its port)
// is declined with the refusal's reason; one never claimed is declined
// when its entry expires.
func TestCommittedOfferDeclined(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{PendingTimeout: 20 * time.Millisecond})
	wrong := Tuple{Client: p.tuple(41003).Client, Server: ap("127.0.0.1:5001")}
	a := p.committed(t, wrong, "w")
	if v := a.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("verdict %s", v)
	}
	wantReason(t, a.Refusal(), ReasonNotShimmed)

	tu := p.tuple(41004)
	b := p.committed(t, tu, "e")
	if v := b.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("verdict of an expired offer %s", v)
	}
	if c := p.drops.wait(t); c != DropExpired {
		t.Fatalf("drop %s", c)
	}
	if _, ok := p.claim(tu); ok {
		t.Fatal("expired offer claimed")
	}
}

// A listener that answers a committed offer with garbage, or closes
// without a word, gives "declined", never a hang or a crash.
func TestCommittedOfferHostileListener(t *testing.T) {
	checkNoLeak(t)
	dir := runDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := dir + "/p1-00000001.sock"
	l, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l)
	if err := unix.Bind(l, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Listen(l, 8)
	n := newNode(t, Config{RunDir: dir})
	e := Entry{PID: 1, Socket: path}
	for i, reply := range [][]byte{
		[]byte("garbage that is no frame at all, long enough to be read as one"),
		(message{kind: kindAnswer, nfiles: 3, data: []byte("x")}).encode(), // files announced, none sent
		(message{kind: kindOffer}).encode(),                                // the wrong kind
		nil,                                                                // closes without a word
	} {
		tu := Tuple{Client: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(41100+i)), Server: ap("127.0.0.1:5000")}
		a, err := n.OfferCommitted(e, tu, Payload{Data: []byte("h")}, -1)
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if reply != nil {
			unix.Write(c, reply)
		}
		unix.Close(c)
		if v := a.WaitVerdict(guard); v != VerdictDeclined {
			t.Fatalf("reply %d: verdict %s", i, v)
		}
		if len(a.Payload.Files) != 0 {
			t.Fatalf("reply %d: %d files kept", i, len(a.Payload.Files))
		}
		a.Close()
	}
}

// A program's accept() that ran out of fds takes back the fds of the
// offers waiting for their accept: their connectors hear "declined",
// and offers are refused (ReasonFDLimit) for a while after.
func TestReleaseForAccept(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	a := p.committed(t, p.tuple(41200), "r")
	b := p.committed(t, p.tuple(41201), "s")
	filed := func() int {
		p.l.pend.mu.Lock()
		defer p.l.pend.mu.Unlock()
		return len(p.l.pend.m)
	}
	for deadline := time.Now().Add(guard); filed() < 2; p.l.srv.intake() {
		if time.Now().After(deadline) {
			t.Fatalf("%d offers filed", filed())
		}
	}
	if n := p.l.ReleaseForAccept(); n != 2 {
		t.Fatalf("released %d, want 2", n)
	}
	for _, x := range []*Answer{a, b} {
		if v := x.WaitVerdict(guard); v != VerdictDeclined {
			t.Fatalf("verdict %s", v)
		}
	}
	if c := p.drops.wait(t); c != DropFDLimit {
		t.Fatalf("drop %s", c)
	}
	c := p.committed(t, p.tuple(41202), "t")
	if v := c.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("verdict right after the release: %s", v)
	}
	wantReason(t, c.Refusal(), ReasonFDLimit)
	if _, ok := p.claim(p.tuple(41200)); ok {
		t.Fatal("a released offer was claimed")
	}
}
