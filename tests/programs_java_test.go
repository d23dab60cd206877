package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Java NIO echo server (one selector thread) and blocking Java clients
// (testdata/JavaEcho.java, run from source) in each mode: 6 connections
// at once, each writing 300 messages of 1 B to 256 KiB from one thread
// while another reads the echo back and checks it, then a half-close;
// then a read blocked on a quiet connection, ended by close() from
// another thread (the JVM signals the reader and dup2s over the fd).
func TestProgramsJava(t *testing.T) {
	a := build(t)
	java := need(t, "java")
	const conns = 6
	src := filepath.Join("testdata", "JavaEcho.java")
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 120*time.Second, java, src, "server", fmt.Sprint(port))
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 120*time.Second, java, src, "client", fmt.Sprint(port), fmt.Sprint(conns), "300")
			if strings.TrimSpace(out) != fmt.Sprintf("ok %d", conns) {
				t.Fatalf("client: %q", out)
			}
			r.checkPair(t, conns+1, false)
		})
	}
}
