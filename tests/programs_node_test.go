package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node.js http server and a node.js http client in each mode: 20
// requests over at least 4 connections (node's agent, maxSockets 4,
// reuses a socket for queued requests), each POSTing 256 KiB and getting
// back their sha256 and 1 MiB derived from them, both checked by the
// client.
func TestProgramsNode(t *testing.T) {
	a := build(t)
	node := need(t, "node")
	const requests = 20
	script := filepath.Join("testdata", "node_http.js")
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, node, script, "server", fmt.Sprint(port))
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 60*time.Second, node, script, "client", fmt.Sprint(port), fmt.Sprint(requests))
			if strings.TrimSpace(out) != fmt.Sprintf("ok %d", requests) {
				t.Fatalf("client: %q", out)
			}
			r.checkPair(t, 4, true)
		})
	}
}
