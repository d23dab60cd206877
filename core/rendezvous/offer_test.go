package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOfferAcrossProcesses runs the whole sequence against a listener in
// another process: lookup, bind, offer with a file, answer with a file,
// commit, connect, accept() claims the 4-tuple, verdict. A second, plain
// connection (no offer) is not claimed.
func TestOfferAcrossProcesses(t *testing.T) {
	checkNoLeak(t)
	dir := runDir(t)
	h := startHelper(t, roleAcceptor, "RV_DIR="+dir)
	var port uint16
	if _, err := fmt.Sscanf(h.line(t), "port %d", &port); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, Config{RunDir: dir})
	dst := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	e := lookupOne(t, n, dst)
	if e.PID != h.cmd.Process.Pid {
		t.Fatalf("entry pid %d, helper %d", e.PID, h.cmd.Process.Pid)
	}

	fd := tcpSocket(t)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	tuple := Tuple{Client: sockaddrAP(sa), Server: dst}
	offerFile := memfd(t, "offer-file")
	ctx, cancel := offerCtx()
	defer cancel()
	a, err := n.Offer(ctx, e, tuple, Payload{Data: []byte("offer-data"), Files: []int{offerFile}})
	unix.Close(offerFile) // the caller kept ownership
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer a.Payload.CloseFiles()
	if string(a.Payload.Data) != "answer-data" || len(a.Payload.Files) != 1 || fdContent(t, a.Payload.Files[0]) != "answer-file" {
		t.Fatalf("answer %q files %v", a.Payload.Data, a.Payload.Files)
	}
	if v := a.Verdict(); v != VerdictPending {
		t.Fatalf("verdict before commit: %s", v)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("claimed offer-data offer-file %d", os.Getpid())
	if got := readLine(t, fd); got != want {
		t.Fatalf("acceptor said %q, want %q", got, want)
	}
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		t.Fatalf("verdict %s", v)
	}

	plain := tcpSocket(t)
	if err := unix.Connect(plain, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, plain); got != "plain" {
		t.Fatalf("plain connection: acceptor said %q", got)
	}
	h.wait(t)
	_, err = n.Lookup(dst)
	wantReason(t, err, ReasonNotShimmed)
}

// tcpSocket returns a new IPv4 TCP socket whose reads time out after
// guard, closed at the test's end.
func tcpSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(guard.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return fd
}

func readLine(t *testing.T, fd int) string {
	t.Helper()
	var b []byte
	buf := make([]byte, 1)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("read line: %q so far, %v", b, err)
		}
		if buf[0] == '\n' {
			return string(b)
		}
		b = append(b, buf[0])
	}
}

// pair is a listener Node and a connector Node in this process, sharing a
// run directory.
type pair struct {
	l, c  *Node
	drops *drops
	entry Entry
	dst   netip.AddrPort
}

func newPair(t *testing.T, lcfg Config) *pair {
	t.Helper()
	return newPairAt(t, lcfg, ap("127.0.0.1:5000"))
}

// newPairAt is newPair with the listener registered at dst.
func newPairAt(t *testing.T, lcfg Config, dst netip.AddrPort) *pair {
	t.Helper()
	dir := runDir(t)
	p := &pair{drops: newDrops(), dst: dst}
	lcfg.RunDir = dir
	if lcfg.Handler == nil {
		lcfg.Handler = echoHandler
	}
	lcfg.OnDrop = p.drops.onDrop
	p.l = newNode(t, lcfg)
	p.c = newNode(t, Config{RunDir: dir})
	if err := p.l.Register(p.dst); err != nil {
		t.Fatal(err)
	}
	p.entry = lookupOne(t, p.c, p.dst)
	return p
}

func (p *pair) tuple(clientPort uint16) Tuple {
	return Tuple{Client: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), clientPort), Server: p.dst}
}

func (p *pair) offer(t *testing.T, tu Tuple, data string) *Answer {
	t.Helper()
	ctx, cancel := offerCtx()
	defer cancel()
	a, err := p.c.Offer(ctx, p.entry, tu, Payload{Data: []byte(data)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); a.Payload.CloseFiles() })
	if string(a.Payload.Data) != "re:"+data || len(a.Payload.Files) != 1 {
		t.Fatalf("answer %q, %d files", a.Payload.Data, len(a.Payload.Files))
	}
	return a
}

func (p *pair) claim(tu Tuple) (Match, bool) {
	m, why := p.l.Claim(tu.Server, tu.Client)
	return m, why == ReasonNone
}

func TestClaimAfterCommit(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(40000)
	a := p.offer(t, tu, "x")
	if _, ok := p.claim(p.tuple(40001)); ok {
		t.Fatal("claimed another 4-tuple")
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	// accept() sees v4-mapped addresses on a v6 socket.
	m, why := p.l.Claim(ap("[::ffff:127.0.0.1]:5000"), ap("[::ffff:127.0.0.1]:40000"))
	if why != ReasonNone {
		t.Fatal("not claimed")
	}
	m.Prepared.(*prepared).release()
	if m.Request.Tuple != tu || string(m.Request.Payload.Data) != "x" || m.Request.Payload.Files != nil ||
		m.Request.Cred.Uid != uint32(os.Geteuid()) || int(m.Request.Cred.Pid) != os.Getpid() {
		t.Fatalf("match %+v", m.Request)
	}
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		t.Fatalf("verdict %s", v)
	}
	if _, ok := p.claim(tu); ok {
		t.Fatal("claimed twice")
	}
	if s := p.l.Stats(); s.Claims != 1 || s.ClaimMisses != 2 || s.Answered != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestClaimWildcardClient(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := Tuple{Client: ap("0.0.0.0:40002"), Server: p.dst} // bound INADDR_ANY
	a := p.offer(t, tu, "w")
	a.Commit()
	m, ok := p.claim(p.tuple(40002))
	if !ok {
		t.Fatal("wildcard-bound connector not claimed")
	}
	m.Prepared.(*prepared).release()
}

func TestAbortedOfferNotClaimed(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(40003)
	a := p.offer(t, tu, "a")
	a.Abort() // the connector gave up: plain connect()
	if _, ok := p.claim(tu); ok {
		t.Fatal("aborted offer claimed")
	}
	if c := p.drops.wait(t); c != DropAborted {
		t.Fatalf("drop %s", c)
	}
	// Not committed but still open (a protocol violation): not claimed.
	a2 := p.offer(t, p.tuple(40004), "b")
	if _, ok := p.claim(p.tuple(40004)); ok {
		t.Fatal("uncommitted offer claimed")
	}
	p.drops.wait(t)
	if v := a2.Verdict(); v != VerdictPending {
		t.Fatalf("verdict before commit: %s", v)
	}
	if err := a2.Commit(); err == nil {
		if v := a2.WaitVerdict(guard); v != VerdictDeclined {
			t.Fatalf("verdict %s", v)
		}
	}
}

func TestPendingExpires(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{PendingTimeout: 10 * time.Millisecond})
	tu := p.tuple(40005)
	a := p.offer(t, tu, "e")
	// ... and the connect() fails, or accept() never comes. On a loaded
	// machine the 10 ms may run out before the commit: the listener has
	// closed the rendezvous connection then, the commit fails, and the
	// connector connects plainly, which is the same end.
	committed := a.Commit() == nil
	if c := p.drops.wait(t); c != DropExpired {
		t.Fatalf("drop %s", c)
	}
	if committed {
		if v := a.WaitVerdict(guard); v != VerdictDeclined {
			t.Fatalf("verdict %s", v)
		}
	}
	if _, ok := p.claim(tu); ok {
		t.Fatal("expired offer claimed")
	}
	if s := p.l.Stats(); s.Drops[DropExpired] != 1 {
		t.Fatalf("drops %v", s.Drops)
	}
}

func TestReusedTupleReplacesOlder(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	tu := p.tuple(40006)
	old := p.offer(t, tu, "old")
	old.Commit()
	newer := p.offer(t, tu, "new")
	if c := p.drops.wait(t); c != DropReplaced {
		t.Fatalf("drop %s", c)
	}
	if v := old.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("old verdict %s", v)
	}
	newer.Commit()
	m, ok := p.claim(tu)
	if !ok || string(m.Request.Payload.Data) != "new" {
		t.Fatalf("claim %v %q", ok, m.Request.Payload.Data)
	}
	m.Prepared.(*prepared).release()
}

func TestListenerClosedBeforeOffer(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	p.l.Unregister(p.dst) // between the connector's Lookup and its Offer
	ctx, cancel := offerCtx()
	defer cancel()
	_, err := p.c.Offer(ctx, p.entry, p.tuple(40007), Payload{})
	wantReason(t, err, ReasonNotShimmed)
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("%v is not a refusal", err)
	}
	// The whole process gone: its socket is gone too.
	p.l.Close()
	_, err = p.c.Offer(ctx, p.entry, p.tuple(40007), Payload{})
	wantReason(t, err, ReasonPeerGone)
	if s := p.c.Stats(); s.Fallback(ReasonNotShimmed) != 1 || s.Fallback(ReasonPeerGone) != 1 || s.Offers != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUIDRefused(t *testing.T) {
	checkNoLeak(t)
	other := uint32(os.Geteuid()) + 1
	// The listener does not allow our uid.
	p := newPair(t, Config{AllowUIDs: []uint32{other}})
	ctx, cancel := offerCtx()
	defer cancel()
	_, err := p.c.Offer(ctx, p.entry, p.tuple(40008), Payload{Data: []byte("u")})
	wantReason(t, err, ReasonRefused)
	if s := p.l.Stats(); s.UIDRejected != 1 || s.Answered != 0 {
		t.Fatalf("listener stats %+v", s)
	}
	// The connector does not allow the listener's uid.
	c := newNode(t, Config{RunDir: p.c.cfg.RunDir, AllowUIDs: []uint32{other}})
	_, err = c.Offer(ctx, p.entry, p.tuple(40009), Payload{})
	wantReason(t, err, ReasonRefused)
	if !errors.Is(err, ErrUIDNotAllowed) {
		t.Fatalf("%v", err)
	}
}

func TestOfferTimeout(t *testing.T) {
	checkNoLeak(t)
	// A listener whose Handler takes longer than the connector waits.
	release := make(chan struct{})
	var once sync.Once
	stuck := func(req Request) (Payload, any, error) {
		<-release
		return echoHandler(req)
	}
	p := newPair(t, Config{Handler: stuck})
	defer once.Do(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := p.c.Offer(ctx, p.entry, p.tuple(40010), Payload{})
	wantReason(t, err, ReasonTimeout)
	once.Do(func() { close(release) })
	// The answer cannot be delivered any more: dropped.
	if c := p.drops.wait(t); c != DropUndelivered {
		t.Fatalf("drop %s", c)
	}
	if _, ok := p.claim(p.tuple(40010)); ok {
		t.Fatal("undelivered offer claimed")
	}

	// The default deadline (Config.OfferTimeout) applies without one.
	c := newNode(t, Config{RunDir: p.c.cfg.RunDir, OfferTimeout: 20 * time.Millisecond})
	silent := silentServer(t)
	_, err = c.Offer(context.Background(), Entry{Socket: silent}, p.tuple(40011), Payload{})
	wantReason(t, err, ReasonTimeout)

	// A cancelled context.
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel2() }()
	_, err = p.c.Offer(ctx2, Entry{Socket: silent}, p.tuple(40012), Payload{})
	wantReason(t, err, ReasonTimeout)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

// silentServer is a unix socket that is listening but never accepts or
// answers.
func silentServer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "silent.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Listen(fd, 16)
	return path
}

func TestHandlerRefusalAndPanic(t *testing.T) {
	checkNoLeak(t)
	h := func(req Request) (Payload, any, error) {
		closeFiles(req.Payload.Files)
		switch string(req.Payload.Data) {
		case "decline":
			return Payload{}, nil, &FallbackError{Reason: ReasonForkDecline, Err: errors.New("child")}
		case "plain-error":
			return Payload{}, nil, errors.New("no memory for a channel")
		case "huge":
			return Payload{Data: make([]byte, MaxData+1)}, nil, nil
		}
		panic("handler bug")
	}
	p := newPair(t, Config{Handler: h})
	ctx, cancel := offerCtx()
	defer cancel()
	for data, want := range map[string]Reason{
		"decline":     ReasonForkDecline,
		"plain-error": ReasonRefused,
		"huge":        ReasonProtocol,
		"panic":       ReasonRefused,
	} {
		_, err := p.c.Offer(ctx, p.entry, p.tuple(40013), Payload{Data: []byte(data)})
		wantReason(t, err, want)
		if want == ReasonRefused && !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%v", err)
		}
	}
	if s := p.l.Stats(); s.HandlerPanics != 1 || s.Refused != 4 {
		t.Fatalf("stats %+v", s)
	}
	p.drops.wait(t) // "huge": prepared but undeliverable
}

func TestCloseDropsPending(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	a := p.offer(t, p.tuple(40014), "c")
	a.Commit()
	p.l.Close()
	if c := p.drops.wait(t); c != DropClosed {
		t.Fatalf("drop %s", c)
	}
	if v := a.WaitVerdict(guard); v != VerdictDeclined {
		t.Fatalf("verdict %s", v)
	}
	if _, ok := p.claim(p.tuple(40014)); ok {
		t.Fatal("claimed after Close")
	}
	if files, _ := filepath.Glob(filepath.Join(p.l.cfg.RunDir, "*")); len(files) != 0 {
		t.Fatalf("left after Close: %v", files)
	}
	if err := p.l.Register(p.dst); err == nil {
		t.Fatal("Register after Close succeeded")
	}
}

// TestConcurrentOffers runs many connectors at once against one listener,
// each claiming its own 4-tuple as accept() would.
func TestConcurrentOffers(t *testing.T) {
	checkNoLeak(t)
	p := newPair(t, Config{})
	const workers, each = 16, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				errs <- p.roundTrip(uint16(41000 + w*each + i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if s := p.l.Stats(); s.Claims != workers*each || s.Answered != workers*each {
		t.Fatalf("stats %+v", s)
	}
}

func (p *pair) roundTrip(port uint16) error {
	tu := p.tuple(port)
	data := fmt.Sprint(port)
	ctx, cancel := offerCtx()
	defer cancel()
	file, err := unix.MemfdCreate("offer", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	a, err := p.c.Offer(ctx, p.entry, tu, Payload{Data: []byte(data), Files: []int{file}})
	unix.Close(file)
	if err != nil {
		return err
	}
	defer a.Close()
	defer a.Payload.CloseFiles()
	if err := a.Commit(); err != nil {
		return err
	}
	m, ok := p.claim(tu)
	if !ok {
		return fmt.Errorf("%s not claimed", tu)
	}
	m.Prepared.(*prepared).release()
	if string(m.Request.Payload.Data) != data || m.Prepared.(*prepared).data != data {
		return fmt.Errorf("%s: matched %q", tu, m.Request.Payload.Data)
	}
	if v := a.WaitVerdict(guard); v != VerdictAccepted {
		return fmt.Errorf("%s: verdict %s", tu, v)
	}
	return nil
}
