package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// A host program that closes every descriptor it did not open itself
// (close_range around its one socket) once its connection is accelerated
// keeps a working stream: the shm provider's memfds, eventfds and sockets
// are PROTECTED in the interposer's table, so close_range passes over
// them. Both ends do it, then move 8 MiB one way, checked byte by byte,
// and 2000 round trips; the kernel's TCP must have carried almost none of
// it (the stream stayed accelerated, it did not break and fall back).
func TestCloseRangeKeepsAcceleratedStream(t *testing.T) {
	a := build(t)
	prog := cbuild(t, "testdata/closerange.c")
	for _, shim := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "shimmed"}[shim], func(t *testing.T) {
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: shim, log: filepath.Join(logs, "server.log")}
			cliSide := side{shim: shim, log: filepath.Join(logs, "client.log")}
			srv := start(t, a.environ(t, srvSide, rd), 90*time.Second, prog, "server", "-p", "0")
			port := srv.listening(t)
			cli := start(t, a.environ(t, cliSide, rd), 90*time.Second, prog, "client", "-p", fmt.Sprint(port))
			for who, p := range map[string]*proc{"client": cli, "server": srv} {
				if err := p.wait(); err != nil {
					t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s\nclient log:\n%s", who, err, p.out.String(), p.errb.String(),
						readLog(t, srvSide.log), readLog(t, cliSide.log))
				}
			}
			for role, p := range map[string]*proc{"client": cli, "server": srv} {
				res := result(t, p.out.String(), role)
				kb, _ := res["kernel_bytes"].(float64)
				switch {
				case shim && kb > 4096:
					t.Errorf("%s: the kernel's TCP carried %.0f bytes after close_range: the stream left the shim\nlog:\n%s",
						role, kb, readLog(t, map[string]string{"client": cliSide.log, "server": srvSide.log}[role]))
				case !shim && role == "server" && kb < 8<<20:
					t.Errorf("plain server: the kernel's TCP carried only %.0f bytes (the check is blind)", kb)
				}
			}
		})
	}
}
