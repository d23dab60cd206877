package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A python asyncio echo server with 50 concurrent clients (one asyncio
// client process), in each mode: each client sends 64 KiB of its own
// random bytes in pieces and gets exactly them back.
func TestProgramsAsyncioEcho(t *testing.T) {
	a := build(t)
	python := need(t, "python3")
	const clients = 50
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 60*time.Second, python, filepath.Join("testdata", "asyncio_echo.py"), "server", fmt.Sprint(port))
			waitListen(t, srv, port)
			out := runTo(t, r.clientEnv(t), 60*time.Second, python, filepath.Join("testdata", "asyncio_echo.py"), "client",
				fmt.Sprint(port), fmt.Sprint(clients), "65536")
			if strings.TrimSpace(out) != fmt.Sprintf("ok %d", clients) {
				t.Fatalf("clients: %q", out)
			}
			r.checkPair(t, clients, false)
		})
	}
}
