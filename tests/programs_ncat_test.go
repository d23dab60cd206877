package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// ncat in each mode and in both directions (the listener receives, then
// the listener sends): a 16 MiB random file arrives with its sha256; one
// connection each way, verdicts as for every pair.
func TestProgramsNcat(t *testing.T) {
	a := build(t)
	ncat := need(t, "ncat")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	want := writeRandomFile(t, src, 16<<20)
	for _, m := range allModes {
		for _, listenerSends := range []bool{false, true} {
			name := m.name + map[bool]string{false: "/to-listener", true: "/from-listener"}[listenerSends]
			t.Run(name, func(t *testing.T) {
				r := newPairRun(t, a, m)
				r.serverExited = true // ncat -l serves one connection
				port := freePort(t)
				dst := filepath.Join(t.TempDir(), "dst.bin")
				lis := fmt.Sprintf("exec %s -l 127.0.0.1 %d --recv-only > %s", ncat, port, dst)
				con := fmt.Sprintf("exec %s 127.0.0.1 %d --send-only < %s", ncat, port, src)
				if listenerSends {
					lis = fmt.Sprintf("exec %s -l 127.0.0.1 %d --send-only < %s", ncat, port, src)
					con = fmt.Sprintf("exec %s 127.0.0.1 %d --recv-only > %s", ncat, port, dst)
				}
				srv := start(t, r.serverEnv(t), 60*time.Second, "sh", "-c", lis)
				waitListen(t, srv, port)
				runTo(t, r.clientEnv(t), 60*time.Second, "sh", "-c", con)
				if err := srv.wait(); err != nil {
					t.Fatalf("listener: %v\n%s", err, srv.errb.String())
				}
				if got := fileHash(t, dst); got != want {
					t.Fatalf("file through ncat differs: sha256 %x, want %x", got, want)
				}
				r.checkPair(t, 1, false)
			})
		}
	}
}
