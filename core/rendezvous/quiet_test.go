package rendezvous

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestQuiet: a record directory that has not changed for a while and
// holds no deferral record is quiet, in the state stat gives; a missing
// one is not (it is made), nor one that changed just now (a record could
// be written within the timestamp granularity), nor one with a record; a
// record written after a quiet state moves the state; a listener
// registering does not.
func TestQuiet(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := n.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Quiet(); ok {
		t.Fatal("quiet without a record directory")
	}
	if n.RecordDir() != filepath.Join(dir, recordDir) {
		t.Fatalf("record directory %s", n.RecordDir())
	}
	age := func() {
		old := time.Now().Add(-time.Second)
		if err := os.Chtimes(n.RecordDir(), old, old); err != nil {
			t.Fatal(err)
		}
	}
	age()
	st, ok := n.Quiet()
	if !ok {
		t.Fatal("not quiet: still for a second, no record")
	}
	if st2, ok := n.Quiet(); !ok || st2 != st {
		t.Fatalf("a second look: %v %v, want %v", st2, ok, st)
	}
	if err := n.Register(ap("127.0.0.1:4001")); err != nil {
		t.Fatal(err)
	}
	if st2, ok := n.Quiet(); !ok || st2 != st {
		t.Fatalf("after a registration: %v %v, want %v", st2, ok, st)
	}

	// A deferral record (written as Defer does) moves the state; once
	// still again, the record keeps it from being quiet.
	d, err := n.Defer(Tuple{Client: ap("127.0.0.1:5555"), Server: ap("127.0.0.1:4000")}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st2, _ := n.Quiet(); st2 == st {
		t.Fatal("a record did not move the directory's state")
	}
	age()
	if _, ok := n.Quiet(); ok {
		t.Fatal("quiet with a record in the directory")
	}
	n.Undefer(d)
	age()
	if _, ok := n.Quiet(); !ok {
		t.Fatal("not quiet once the record went")
	}
	// A temporary file a dead writer left long ago does not count.
	stale := filepath.Join(n.RecordDir(), tempName(999999, 1))
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * staleTempAge)
	os.Chtimes(stale, long, long)
	age()
	if _, ok := n.Quiet(); !ok {
		t.Fatal("not quiet with only a stale temporary file")
	}
	// Anything else counts.
	if err := os.WriteFile(filepath.Join(n.RecordDir(), "nonsense"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age()
	if _, ok := n.Quiet(); ok {
		t.Fatal("quiet with a file in the record directory")
	}
}

// TestOnPending: the count told is never 0 from before the server takes
// the offer's connection off its socket until the claim (held.go), and 0
// once everything is claimed and served; ServerFD is the socket.
func TestOnPending(t *testing.T) {
	dir := runDir(t)
	held := make(chan int, 64)
	srv := newNode(t, Config{RunDir: dir, Handler: echoHandler, OnPending: func(n int) { held <- n }})
	if srv.ServerFD() != -1 {
		t.Fatal("a server fd before the first Register")
	}
	if err := srv.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	if srv.ServerFD() < 0 {
		t.Fatal("no server fd after Register")
	}
	cli := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	tu := Tuple{Client: ap("127.0.0.1:5555"), Server: ap("127.0.0.1:4000")}
	ctx, cancel := offerCtx()
	defer cancel()
	ans, err := cli.Offer(ctx, lookupOne(t, cli, tu.Server), tu, Payload{Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ans.Commit(); err != nil {
		t.Fatal(err)
	}
	var told []int
	drain := func() {
		for {
			select {
			case n := <-held:
				told = append(told, n)
			default:
				return
			}
		}
	}
	drain()
	if len(told) == 0 || slices.Contains(told, 0) {
		t.Fatalf("told %v before the claim: want some, none 0", told)
	}
	m, why := srv.Claim(tu.Server, tu.Client)
	if why != ReasonNone {
		t.Fatal("claim failed")
	}
	m.Prepared.(*prepared).release()
	deadline := time.Now().Add(5 * time.Second)
	for drain(); told[len(told)-1] != 0; drain() {
		if time.Now().After(deadline) {
			t.Fatalf("told %v: never 0 after the claim", told)
		}
		time.Sleep(time.Millisecond)
	}
	for _, fd := range ans.Payload.Files {
		unix.Close(fd)
	}
	ans.Close()
}
