package tests

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server at its fd limit (testdata/fdlimit.c): with RLIMIT_NOFILE 256
// and 400 clients' connections waiting in its backlog, it accepts until
// accept fails, and fails with EMFILE as on kernel TCP, after as many
// connections (an accelerated connection costs the program one fd, its
// socket; the shim's own are a few per process, and one per epoll set of
// each peer process: its bells). Its connections all echo, waited for
// with poll, or with epoll (then the peers ring each other's bells);
// `sdpshim stats` answers it while it is at the limit; and once it
// closed them, new connections to it are accelerated again.
func TestServerAtFDLimit(t *testing.T) {
	for _, mode := range []string{"poll", "epoll"} {
		t.Run(mode, func(t *testing.T) { serverAtFDLimit(t, mode) })
	}
}

func serverAtFDLimit(t *testing.T, mode string) {
	a := build(t)
	bin := cbuildShared(t, "testdata/fdlimit.c")
	const limit, clients = 256, 400
	accepted := map[bool]int{}
	for _, shim := range []bool{false, true} {
		rd := runDir(t)
		srvLog := filepath.Join(t.TempDir(), "server.log")
		srv := startPiped(t, a.environ(t, side{shim: shim, log: srvLog}, rd), 2*time.Minute, bin, "server", fmt.Sprint(limit), mode)
		var port struct{ Port int }
		waitJSON(t, srv, "port", &port)
		cli := startPiped(t, a.environ(t, side{shim: shim}, rd), 2*time.Minute, bin, "client", fmt.Sprint(port.Port), fmt.Sprint(clients), mode)
		waitJSON(t, cli, "connected", nil)

		io.WriteString(srv.in, "accept\n")
		var acc struct {
			Accepted int
			Errno    string
		}
		waitJSON(t, srv, "accepted", &acc)
		if acc.Errno != "EMFILE" {
			t.Fatalf("shim %v: accept stopped after %d with %q, want EMFILE", shim, acc.Accepted, acc.Errno)
		}
		accepted[shim] = acc.Accepted
		if shim {
			if _, err := statsJSON(t, rd, srv.cmd.Process.Pid); err != nil {
				t.Errorf("stats of the server at its fd limit: %v", err)
			}
		}

		io.WriteString(cli.in, "go\n")
		io.WriteString(srv.in, "serve\n")
		var echoed struct{ Echoed int }
		var echoes struct{ Echoes int }
		waitJSON(t, srv, "echoed", &echoed)
		waitJSON(t, cli, "echoes", &echoes)
		if echoed.Echoed != acc.Accepted || echoes.Echoes != acc.Accepted {
			t.Errorf("shim %v: %d accepted, %d echoed by the server, %d echoes at the client", shim, acc.Accepted, echoed.Echoed, echoes.Echoes)
		}
		cli.in.Close()
		cli.wait()

		if shim {
			// Under the limit again: the backlog's rest taken and closed,
			// then a new client's connections are accelerated.
			io.WriteString(srv.in, "close 100000\naccept\nclose 100000\n")
			waitLines(t, srv, `"closed":`, 2)
			cliLog := filepath.Join(t.TempDir(), "client.log")
			late := startPiped(t, a.environ(t, side{shim: true, log: cliLog}, rd), time.Minute, bin, "client", fmt.Sprint(port.Port), "4", mode)
			waitJSON(t, late, "connected", nil)
			io.WriteString(srv.in, "accept\n")
			waitLines(t, srv, `"accepted":`, 3)
			io.WriteString(late.in, "go\n")
			io.WriteString(srv.in, "serve\n")
			waitLines(t, srv, `"echoed":`, 2)
			var lateEchoes struct{ Echoes int }
			waitJSON(t, late, "echoes", &lateEchoes)
			late.in.Close()
			late.wait()
			if n := strings.Count(readLog(t, cliLog), "connected accelerated"); lateEchoes.Echoes != 4 || n != 4 {
				t.Errorf("after the limit: %d of 4 echoes, %d of 4 connections accelerated", lateEchoes.Echoes, n)
			}
		}
		srv.in.Close()
		srv.wait()
	}
	t.Logf("connections accepted under RLIMIT_NOFILE %d: kernel TCP %d, shim %d", limit, accepted[false], accepted[true])
	// The shim's own fds, a constant per process whatever the number of
	// connections (11 here): the Go runtime's poller (an epoll fd and an
	// eventfd), the switch watcher's epoll fd and its bell (an eventfd),
	// the rendezvous and stats sockets, the spare (fdhook.AtLimit), the
	// core's copy for fork children, the debug log, and one pipe; and per
	// client process, its watcher's bell, and its set's (or, when it had
	// no epoll set at its connect, its spare bell: shim/bells.go).
	if accepted[true] < accepted[false]-15 {
		t.Errorf("under the shim the server accepted %d connections before EMFILE, over kernel TCP %d", accepted[true], accepted[false])
	}
}

// waitLines waits until p printed n lines holding s.
func waitLines(t *testing.T, p *proc, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(p.out.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d %s lines after 30 s:\n%s\n%s", n, s, p.out.String(), p.errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
