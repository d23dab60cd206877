package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Servers that block in poll, select or epoll on accelerated sockets
// (nonblocking event loops, preload/ctest/testdata/echo.c) serve shimmed
// clients correctly, accelerated on both sides, with each client I/O style.
func TestEventLoopsAccelerated(t *testing.T) {
	a := build(t)
	ios := []string{"rw", "vec", "msg", "waitall"}
	for _, loop := range []string{"iter", "poll", "select", "epoll", "epoll_pwait2"} {
		t.Run(loop, func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: true, log: filepath.Join(logs, "server.log")}
			srv := start(t, a.environ(t, srvSide, rd), 60*time.Second, a.echo, "server", loop, fmt.Sprint(len(ios)))
			port := echoPort(t, srv)
			for i, io := range ios {
				cliSide := side{shim: true, log: filepath.Join(logs, io+".log")}
				cli := start(t, a.environ(t, cliSide, rd), 30*time.Second, a.echo, "client", fmt.Sprint(port), "2000000", fmt.Sprint(i+1), io)
				if err := cli.wait(); err != nil || !strings.HasPrefix(cli.out.String(), "ok 2000000 ") {
					t.Fatalf("client %s: %v %q\n%s", io, err, cli.out.String(), cli.errb.String())
				}
				if l := readLog(t, cliSide.log); !strings.Contains(l, "connected accelerated") {
					t.Errorf("client %s not accelerated:\n%s", io, l)
				}
			}
			if err := srv.wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srv.errb.String())
			}
			if n := strings.Count(readLog(t, srvSide.log), "accepted accelerated"); n != len(ios) {
				t.Errorf("server accepted %d accelerated connections, want %d", n, len(ios))
			}
		})
	}
}

// echoPort waits for echo's "port N" line.
func echoPort(t *testing.T, p *proc) int {
	t.Helper()
	re := regexp.MustCompile(`port (\d+)`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			var port int
			fmt.Sscan(m[1], &port)
			return port
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("echo server printed no port\n%s", p.errb.String())
	return 0
}
