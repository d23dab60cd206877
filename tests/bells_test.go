package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// A server closes a connection first; its client reads the end 150 ms
// later, closes and opens the next connection at once. The server released
// the first connection's handle meanwhile, the client did not (it still
// holds its record of the server, and so gives it none of its bells
// again): the server must still hold the client's bells, so that it wakes
// the client's epoll sleeper with one of them, not a byte on the socket.
// A server that dropped its record with its last connection woke every
// sleep of the second connection over the socket
// (testdata/reconnect_epoll.py).
func TestBellsOutliveConnections(t *testing.T) {
	a := build(t)
	python := need(t, "python3")
	sdpshimCLI(t)
	rd := runDir(t)
	env := a.environ(t, side{shim: true}, rd)
	script := filepath.Join("testdata", "reconnect_epoll.py")
	srv := start(t, env, 60*time.Second, python, script, "server", "20")
	port := srv.listening(t)
	cli := startPiped(t, append(env, "SDPSHIM_POLL=event"), 60*time.Second, python, script, "client", fmt.Sprint(port), "20")
	waitJSON(t, cli, "ready", nil)
	s := waitSnapshot(t, rd, srv.cmd.Process.Pid, "the second connection", func(s *stats.Snapshot) bool {
		return acceleratedConn(s) != nil
	})
	c := acceleratedConn(s)
	t.Logf("server's second connection: %+v", *c)
	tell(t, cli)
	if err := cli.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.errb.String())
	}
	if c.MessagesSent < 20 {
		t.Fatalf("the server's second connection sent %d messages, want 20", c.MessagesSent)
	}
	if c.SocketRings != 0 {
		t.Fatalf("the server woke the client's epoll sleeper %d times over the socket (it lost the client's bells)", c.SocketRings)
	}
}
