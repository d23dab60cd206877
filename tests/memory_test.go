package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A server's memory per connection (testdata/churn.c, hold): 300 shimmed
// clients' connections held open at once by one process, each carrying
// 50 echoes of 100 bytes, against one long-running shimmed echo server.
// The connections' areas are shared memory in the server's RSS (a
// kernel socket's buffers are kernel memory, outside it), so a
// connection must keep few of its area's pages resident: a sender whose
// receiver keeps up uses two blocks of its ring, not all of them
// (preload/c/direct.c, link_of). Before, each such connection kept a
// page of every block of both directions: 512 KiB. The same run over
// kernel TCP is logged beside it.
func TestServerMemoryPerConnection(t *testing.T) {
	a := build(t)
	bin := cbuildShared(t, "testdata/churn.c")
	const conns, rounds, size = 300, 50, 100
	for _, shim := range []bool{false, true} {
		srv := startChurnServer(t, a, bin, shim, 2*time.Minute)
		rd, srvLog, pid := srv.rd, srv.log, srv.pid
		before := usage(t, pid)
		cli := startPiped(t, a.environ(t, side{shim: shim}, rd), 2*time.Minute, bin, "hold",
			fmt.Sprint(srv.port), fmt.Sprint(conns), fmt.Sprint(rounds), fmt.Sprint(size))
		waitJSON(t, cli, "held", nil)
		held := usage(t, pid)
		cli.in.Close()
		if err := cli.wait(); err != nil {
			t.Fatalf("shim %v: client: %v\n%s", shim, err, cli.errb.String())
		}
		perConn := func(kb, kb0 int) float64 { return float64(kb-kb0) / conns }
		t.Logf("shim %v: server before %v, holding %d connections %v: %.1f KiB of RSS and %.1f of shared memory a connection",
			shim, before, conns, held, perConn(held.rssKB, before.rssKB), perConn(held.shmemKB, before.shmemKB))
		if !shim {
			continue
		}
		if n := strings.Count(readLog(t, srvLog), "accepted accelerated"); n < conns {
			t.Fatalf("%d of %d connections accelerated:\n%s", n, conns, tail(readLog(t, srvLog), 3000))
		}
		// An area's header page, and per direction its first two
		// blocks' first pages: 16 KiB; 64 allows for the slabs' and
		// the core's own.
		if kb := perConn(held.shmemKB, before.shmemKB); kb > 64 {
			t.Errorf("the server holds %.1f KiB of shared memory a connection after small echoes", kb)
		}
	}
}

// A burst's memory goes back once the connection is quiet
// (shim/trim.go): 20 connections held open by one shimmed client, each
// echoing one burst of 256 KiB sent in one call, which fills 16 blocks of
// both directions' rings, against a shimmed echo server. Right after the
// bursts the server holds their pages (shared memory: a kernel socket's
// buffers are kernel memory and drain as they are read); within a few
// seconds of quiet, each direction's sender gives back the pages of its
// drained blocks past the first two. The same run over kernel TCP is
// logged beside it.
func TestServerMemoryAfterBurst(t *testing.T) {
	a := build(t)
	bin := cbuildShared(t, "testdata/churn.c")
	const conns, size = 20, 256 << 10
	for _, shim := range []bool{false, true} {
		srv := startChurnServer(t, a, bin, shim, 2*time.Minute)
		before := usage(t, srv.pid)
		cli := startPiped(t, a.environ(t, side{shim: shim}, srv.rd), 2*time.Minute, bin, "hold",
			fmt.Sprint(srv.port), fmt.Sprint(conns), "1", fmt.Sprint(size), "burst")
		waitJSON(t, cli, "held", nil)
		burst := usage(t, srv.pid)
		perConn := func(u procUsage) float64 { return float64(u.shmemKB-before.shmemKB) / conns }
		// The trimmer looks once a second and gives pages back at its
		// second look after the last send: a few seconds, bounded here
		// by ten.
		quiet, end := burst, time.Now().Add(10*time.Second)
		for shim && perConn(quiet) > 64 && time.Now().Before(end) {
			time.Sleep(250 * time.Millisecond)
			quiet = usage(t, srv.pid)
		}
		t.Logf("shim %v: server before %v, after the bursts %v (%.1f KiB of shared memory a connection), quiet %v (%.1f KiB)",
			shim, before, burst, perConn(burst), quiet, perConn(quiet))
		cli.in.Close()
		if err := cli.wait(); err != nil {
			t.Fatalf("shim %v: client: %v\n%s", shim, err, cli.errb.String())
		}
		if !shim {
			continue
		}
		if n := strings.Count(readLog(t, srv.log), "accepted accelerated"); n < conns {
			t.Fatalf("%d of %d connections accelerated:\n%s", n, conns, tail(readLog(t, srv.log), 3000))
		}
		if kb := perConn(burst); kb < 256 {
			t.Fatalf("the bursts left %.1f KiB of shared memory a connection: they did not fill the rings", kb)
		}
		if kb := perConn(quiet); kb > 64 {
			t.Errorf("the server holds %.1f KiB of shared memory a connection 10 s after the bursts", kb)
		}
	}
}
