package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Posted offers (shim/post.go): once a client process's first
// connection to a server went through the rendezvous, its next ones are
// offered through the slab the server maps, and claimed there. A python
// client (blocking connects) opens a batch of connections to the churn
// echo server, echoes on each and closes it, pauses long enough for the
// idle server to let the client's slab go (reap.go: a second after its
// last close), then opens a second batch: the slab is offered through the
// rendezvous again, not posted to a server that no longer reads it. Every
// connection must be accelerated, most of them claimed from a post, and
// the server must have unmapped the slab during the pause.
func TestPostedOffers(t *testing.T) {
	a := build(t)
	python := need(t, "python3")
	bin := cbuildShared(t, "testdata/churn.c")
	srv := startChurnServer(t, a, bin, true, time.Minute)
	const batch = 20
	const script = `
import socket, sys, time
port, n, pause = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def run():
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        msg = bytes([i % 251]) * 3000
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            b = s.recv(len(msg) - len(got))
            if not b:
                sys.exit("EOF after %d bytes" % len(got))
            got += b
        if got != msg:
            sys.exit("echo differs")
        s.close()
run()
print("paused", flush=True)
time.sleep(pause)
run()
print("ok", flush=True)
`
	cli := start(t, a.environ(t, side{shim: true}, srv.rd), time.Minute, python, "-c", script,
		fmt.Sprint(srv.port), fmt.Sprint(batch), "3")
	// While the client pauses, the server's mappings of areas go to none.
	drained := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !drained; {
		if strings.Contains(cli.out.String(), "paused") && usage(t, srv.pid).memfdMaps == 0 {
			drained = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cli.wait(); err != nil || !strings.Contains(cli.out.String(), "ok") {
		t.Fatalf("client: %v %q\n%s", err, cli.out.String(), cli.errb.String())
	}
	if !drained {
		t.Error("the server kept the client's slab mapped through the pause")
	}
	if n := strings.Count(readLog(t, srv.log), "accepted accelerated"); n != 2*batch {
		t.Errorf("server accepted %d accelerated connections, want %d", n, 2*batch)
	}
	s, err := statsJSON(t, srv.rd, srv.pid)
	if err != nil {
		t.Fatal(err)
	}
	claimed := s.Events["offer.posted_claimed"]
	t.Logf("server: %d of %d connections claimed from a post (events %v)", claimed, 2*batch, s.Events)
	if claimed < batch || claimed > 2*batch-2 {
		// Each batch's first connection goes through the rendezvous.
		t.Errorf("%d connections claimed from a post, want %d to %d", claimed, batch, 2*batch-2)
	}
}
