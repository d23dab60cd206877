package tests

import (
	"strings"
	"testing"
)

// Deferred acceptance ("the first user claims", shim/deferred*.go): a
// listener that fork children share becomes a group listener, connectors
// defer, and the process that first uses an accepted connection pulls it.
// Three server shapes (testdata/fork_echo.c): prefork (the master listens,
// forks two workers that accept; the master closes its copy), perconn
// (accept in the parent, fork, the child serves: postgres's shape) and
// epollconn (perconn whose child first adds the socket to an epoll set
// and waits there, as a postgres backend does), pollconn and selectconn
// (the child first waits in poll or select: the claim hook). Every
// client echoes byte-exact; the logs must show the children's connections
// accelerated.
//
// This needs fork children that run a core of their own (the interposer
// loads a fresh one in the child, and its host says so: Host.ChildCores);
// a build where they do not fails here.
func TestDeferredForkServers(t *testing.T) {
	for _, mode := range []string{"prefork", "perconn", "epollconn", "pollconn", "selectconn"} {
		t.Run(mode, func(t *testing.T) {
			sizes := []int{1 << 20, 64 << 10, 2 << 20, 1, 300 << 10, 1 << 20, 5000, 512 << 10}
			srv, cli := forkRun(t, true, mode, 0, sizes...)
			if !strings.Contains(srv, "listener shared with a child process: group listener") {
				t.Fatalf("the listener did not become a group listener:\n%s", srv)
			}
			// perconn: the first connection is accepted before the first
			// fork (accelerated, then switched to kernel TCP by it).
			first := 0
			if mode != "prefork" {
				first = 1
			}
			for i, l := range cli[first:] {
				if !strings.Contains(l, "deferred") || !strings.Contains(l, "connected accelerated") {
					t.Errorf("client %d not deferred then accelerated:\n%s", i+first, l)
				}
			}
			if n := strings.Count(srv, "deferred connection claimed: accelerated"); n != len(cli)-first {
				t.Errorf("server side claimed %d deferred connections, want %d:\n%s", n, len(cli)-first, srv)
			}
			noWarnings(t, srv)
		})
	}
}
