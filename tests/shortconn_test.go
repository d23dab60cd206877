package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShortLivedConnections: a process that opens one short connection
// after another to the same server (tests/testdata/churn.c: each sends
// 64 bytes, reads the echo and closes) gets its first ones accelerated,
// then, as SDPSHIM_SHORT_CONN asks by default, keeps the next ones on
// kernel TCP with the reason short-lived, accelerating one again now and
// then; every echo is right either way, and the server takes the plain
// ones as plain connections.
func TestShortLivedConnections(t *testing.T) {
	a := build(t)
	bin := cbuildShared(t, "testdata/churn.c")
	rd := runDir(t)
	logs := t.TempDir()
	srv := start(t, a.environ(t, side{shim: true}, rd), time.Minute, bin, "server")
	var port struct{ Port int }
	waitJSON(t, srv, "port", &port)
	const conns = 60
	cliSide := side{shim: true, log: filepath.Join(logs, "client.log"), env: []string{"SDPSHIM_SHORT_CONN=1"}}
	cli := start(t, a.environ(t, cliSide, rd), time.Minute, bin, "client", fmt.Sprint(port.Port), fmt.Sprint(conns), "64", "exit")
	if err := cli.wait(); err != nil || !strings.Contains(cli.out.String(), fmt.Sprintf(`{"ok":%d}`, conns)) {
		t.Fatalf("client: %v %q\n%s", err, cli.out.String(), cli.errb.String())
	}
	l := readLog(t, cliSide.log)
	acc, short := strings.Count(l, "connected accelerated"), strings.Count(l, "reason=short-lived")
	t.Logf("%d connections: %d accelerated, %d short-lived on kernel TCP", conns, acc, short)
	// Eight short ones in a row, then plain runs of 8 and 16 with a probe
	// before each: at least 8 accelerated, and most of the rest plain.
	if acc < 8 || short < conns/2 || acc+short != conns {
		t.Errorf("%d accelerated and %d short-lived of %d connections, want at least 8 and %d, and all counted", acc, short, conns, conns/2)
	}
}
