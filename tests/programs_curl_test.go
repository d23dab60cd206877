package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// curl downloads a 100 MiB file from python3 -m http.server in each mode:
// the sha256 matches; both shimmed, the connection is accelerated on both
// sides; one side shimmed, that side records a fallback because its peer
// is not shimmed.
func TestProgramsCurlHTTPServer(t *testing.T) {
	a := build(t)
	curl := need(t, "curl")
	python := need(t, "python3")
	const size = 100 << 20
	www := t.TempDir()
	want := writeRandomFile(t, filepath.Join(www, "big.bin"), size)
	for _, m := range allModes {
		t.Run(m.name, func(t *testing.T) {
			r := newPairRun(t, a, m)
			port := freePort(t)
			srv := start(t, r.serverEnv(t), 90*time.Second, python, "-m", "http.server", fmt.Sprint(port),
				"--bind", "127.0.0.1", "--directory", www)
			waitListen(t, srv, port)
			out := filepath.Join(t.TempDir(), "got.bin")
			runTo(t, r.clientEnv(t), 60*time.Second, curl, "-sS", "--fail", "-o", out,
				fmt.Sprintf("http://127.0.0.1:%d/big.bin", port))
			if got := fileHash(t, out); got != want {
				t.Fatalf("downloaded file differs: sha256 %x, want %x", got, want)
			}
			r.checkPair(t, 1, false)
		})
	}
}
