package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Accepts nobody offered are decided by the interposer alone
// (preload/c/plainaccept.c) once the core has seen the run directory
// without deferral records. Plain and shimmed clients take turns against
// one shimmed server: one with a listener of its own (churn: an epoll
// echo server; shimmed connectors offer to it), and one that shares its
// listener with fork children (fork_echo perconn: a postgres-like server
// whose shimmed connectors defer, writing a record). Every shimmed
// client's connections must be accelerated and every plain one's counted
// peer-not-shimmed, some of them by the interposer without the core. A
// plain client starts 100 ms after the one before, so that the run
// directory has been still for longer than the core requires.
func TestPlainAccepts(t *testing.T) {
	a := build(t)
	turns := []bool{false, false, false, true, false, false, true, true, false, false}
	plains, shimmed := 0, 0
	for _, s := range turns {
		if s {
			shimmed++
		} else {
			plains++
		}
	}
	check := func(t *testing.T, srvLog string, plainConns, accel int, accelMsg string) {
		t.Helper()
		log := readLog(t, srvLog)
		v := logVerdicts(t, srvLog, true)
		if n := v.fallbacks["peer-not-shimmed"]; n != plainConns || len(v.fallbacks) != 1 {
			t.Errorf("server fallbacks %v, want peer-not-shimmed: %d", v.fallbacks, plainConns)
		}
		if n := strings.Count(log, accelMsg); n != accel {
			t.Errorf("server: %d %q, want %d", n, accelMsg, accel)
		}
		alone := strings.Count(log, ": connection stays on kernel TCP: ")
		if alone == 0 || alone >= plainConns {
			t.Errorf("the interposer decided %d of %d plain accepts alone, want some but not the first", alone, plainConns)
		}
		t.Logf("%d plain connections, %d decided by the interposer alone; %d accelerated", plainConns, alone, accel)
		if t.Failed() {
			t.Logf("server log:\n%s", tail(log, 60))
		}
	}

	t.Run("own-listener", func(t *testing.T) {
		bin := cbuildShared(t, "testdata/churn.c")
		rd := runDir(t)
		srvLog := filepath.Join(t.TempDir(), "server.log")
		srv := start(t, a.environ(t, side{shim: true, log: srvLog}, rd), time.Minute, bin, "server")
		var port struct{ Port int }
		waitJSON(t, srv, "port", &port)
		const conns = 3
		for i, s := range turns {
			if !s {
				time.Sleep(100 * time.Millisecond)
			}
			p := start(t, a.environ(t, side{shim: s}, rd), 30*time.Second, bin, "client", fmt.Sprint(port.Port),
				fmt.Sprint(conns), "4096", "exit")
			if err := p.wait(); err != nil || !strings.Contains(p.out.String(), fmt.Sprintf(`{"ok":%d}`, conns)) {
				t.Fatalf("client %d (shimmed %v): %v %q\n%s", i, s, err, p.out.String(), p.errb.String())
			}
		}
		check(t, srvLog, plains*conns, shimmed*conns, "accepted accelerated")
	})

	t.Run("group-listener", func(t *testing.T) {
		_, prog := forkEcho(t)
		rd := runDir(t)
		srvLog := filepath.Join(t.TempDir(), "server.log")
		srv := start(t, a.environ(t, side{shim: true, log: srvLog}, rd), time.Minute, prog, "server", "perconn", fmt.Sprint(len(turns)), "0")
		port := echoPort(t, srv)
		for i, s := range turns {
			if !s {
				time.Sleep(100 * time.Millisecond)
			}
			n := 64<<10 + i
			cli := start(t, a.environ(t, side{shim: s}, rd), 30*time.Second, prog, "client", fmt.Sprint(port), fmt.Sprint(n), fmt.Sprint(i+11), "0")
			if err := cli.wait(); err != nil || strings.TrimSpace(cli.out.String()) != fmt.Sprintf("ok %d", n) {
				t.Fatalf("client %d (shimmed %v): %v %q\n%s", i, s, err, cli.out.String(), cli.errb.String())
			}
		}
		if err := srv.wait(); err != nil {
			t.Fatalf("server: %v\n%s", err, srv.errb.String())
		}
		check(t, srvLog, plains, shimmed, "deferred connection claimed: accelerated")
	})
}
