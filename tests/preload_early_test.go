package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client that fills the early buffer before the acceptor claims the
// connection, then waits for writability in select, poll or epoll, is
// woken when a goroutine of the shim accelerates the socket and flushes
// the early bytes (tests/testdata/early_wait.c). Each wait is bounded by
// 4 s: a longer one is a lost wakeup. Before the fix about one connection
// in 3000 slept through it under select (ncat --send-only hung this way).
func TestEarlyWritesThenWait(t *testing.T) {
	a := build(t)
	prog := cbuild(t, "testdata/early_wait.c")
	const conns = 2000
	for _, mode := range []string{"select", "poll", "epoll"} {
		t.Run(mode, func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: true, log: filepath.Join(logs, "server.log")}
			srv := start(t, a.environ(t, srvSide, rd), 120*time.Second, prog, "server", fmt.Sprint(conns))
			port := echoPort(t, srv)
			cli := start(t, a.environ(t, side{shim: true}, rd), 120*time.Second, prog, "client", fmt.Sprint(port), fmt.Sprint(conns), mode)
			if err := cli.wait(); err != nil {
				t.Fatalf("client: %v %q\n%s", err, cli.out.String(), tail(cli.errb.String(), 20))
			}
			if err := srv.wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srv.errb.String())
			}
			if n := strings.Count(readLog(t, srvSide.log), "accepted accelerated"); n != conns {
				t.Errorf("server accepted %d accelerated connections, want %d", n, conns)
			}
		})
	}
}
