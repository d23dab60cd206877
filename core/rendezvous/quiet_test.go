package rendezvous

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestQuiet: a run directory that has not changed for a while and holds
// no deferral record is quiet, in the state stat gives; one that changed
// just now is not (a record could be written within the timestamp
// granularity), nor one with a record; a record written after a quiet
// state moves the state; and the pending table tells OnPending how many
// offers it holds.
func TestQuiet(t *testing.T) {
	dir := runDir(t)
	n := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	if err := n.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Quiet(); ok {
		t.Fatal("quiet right after a change")
	}
	age := func() {
		old := time.Now().Add(-time.Second)
		if err := os.Chtimes(dir, old, old); err != nil {
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

	// A deferral record (written as Defer does) moves the state; once
	// still again, the record keeps it from being quiet.
	d, err := n.Defer(Tuple{Client: ap("127.0.0.1:5555"), Server: ap("127.0.0.1:4000")})
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
	// Anything named like a record counts.
	if err := os.WriteFile(filepath.Join(dir, "nonsense"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	age()
	if _, ok := n.Quiet(); ok {
		t.Fatal("quiet with a file named like a NAT record")
	}
}

// TestOnPending: the table tells how many offers it holds, before each
// answer goes out and after each claim.
func TestOnPending(t *testing.T) {
	dir := runDir(t)
	held := make(chan int, 16)
	srv := newNode(t, Config{RunDir: dir, Handler: echoHandler, OnPending: func(n int) { held <- n }})
	if err := srv.Register(ap("127.0.0.1:4000")); err != nil {
		t.Fatal(err)
	}
	cli := newNode(t, Config{RunDir: dir, Handler: echoHandler})
	tu := Tuple{Client: ap("127.0.0.1:5555"), Server: ap("127.0.0.1:4000")}
	ctx, cancel := offerCtx()
	defer cancel()
	ans, err := cli.Offer(ctx, lookupOne(t, cli, tu.Server), tu, Payload{Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-held; got != 1 {
		t.Fatalf("held %d after the answer, want 1", got)
	}
	if err := ans.Commit(); err != nil {
		t.Fatal(err)
	}
	m, ok := srv.Claim(tu.Server, tu.Client)
	if !ok {
		t.Fatal("claim failed")
	}
	m.Prepared.(*prepared).release()
	if got := <-held; got != 0 {
		t.Fatalf("held %d after the claim, want 0", got)
	}
	for _, fd := range ans.Payload.Files {
		unix.Close(fd)
	}
	ans.Close()
}
