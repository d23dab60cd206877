package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/sdpshim/sdpshim/bench/results"
)

// soakFDSlack is how many more fds than at the start the soak's server
// may hold once the last client has gone.
const soakFDSlack = 4

// TestBenchSoak runs `sdpshim bench --json soak --duration 12s` end to
// end (about 30 s: the checksummed soak program over kernel TCP, then
// under the preload, for 12 s each; bench/soak) and asserts the shim's
// column: no mismatch, hang, error or fallback, and the server's fds
// back to within soakFDSlack of the start. Kernel TCP's column must be
// clean too (else the program or the machine is at fault). The curves
// and the RSS are logged, not judged. It runs again with --prefork for
// 8 s a column: every connection deferred (shim/deferred.go), pulled by
// the server at its first use, with the client's first bytes on the
// kernel socket until then.
func TestBenchSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the soak (about 50 s)")
	}
	need(t, "gcc")
	t.Run("own-listener", func(t *testing.T) { testBenchSoak(t, false, "--duration", "12s") })
	t.Run("pre-fork", func(t *testing.T) { testBenchSoak(t, true, "--duration", "8s", "--prefork") })
}

// testBenchSoak runs the soak with args; prefork: every connection the
// server's shim accelerated must have been deferred and pulled.
func testBenchSoak(t *testing.T, prefork bool, args ...string) {
	cmd := exec.Command(sdpshimCLI(t), append([]string{"bench", "--json", "soak"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run() // non-nil when the soak found a problem: the figures say which
	var run results.Run
	if jerr := json.Unmarshal(stdout.Bytes(), &run); jerr != nil {
		t.Fatalf("sdpshim bench: %v; results: %v\n%s", err, jerr, stderr.String())
	}
	t.Logf("tables:\n%s", stderr.String())
	figs := map[string]results.Figure{}
	for _, f := range run.Figures {
		figs[f.Name] = f
	}
	value := func(name string, shim bool) float64 {
		t.Helper()
		f, ok := figs[name]
		v := f.Kernel
		if shim {
			v = f.Shim
		}
		if !ok || v == nil {
			t.Fatalf("no figure %q (sdpshim %v); sdpshim bench: %v", name, shim, err)
		}
		return v.Median
	}
	for _, shim := range []bool{false, true} {
		col := map[bool]string{false: "kernel TCP", true: "sdpshim"}[shim]
		for _, name := range []string{"mismatches", "hangs", "errors"} {
			if n := value(name, shim); n != 0 {
				t.Errorf("%s: %g %s", col, n, name)
			}
		}
		if n, done := value("connections", shim), value("connections completed", shim); n == 0 || done != n {
			t.Errorf("%s: %g of %g connections completed", col, done, n)
		}
	}
	if n := value("fallbacks", true); n != 0 {
		t.Errorf("sdpshim: %g connections fell back", n)
	}
	if acc, pulled := value("server connections accelerated", true), value("server connections pulled (deferred)", true); prefork && (acc == 0 || pulled != acc) {
		t.Errorf("sdpshim, pre-fork server: %g of %g accelerated connections deferred and pulled", pulled, acc)
	}
	start, end := value("server fds at the start", true), value("server fds at the end", true)
	if end-start > soakFDSlack {
		t.Errorf("sdpshim: the server holds %g fds after the clients, %g after the warm-up", end, start)
	}
	if err != nil && !t.Failed() {
		t.Errorf("sdpshim bench: %v, yet every figure is clean", err)
	}
}
