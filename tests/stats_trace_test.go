package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `sdpshim trace` (root) sees, live, a forced fallback decided by the core
// (a shimmed client of a plain server: peer-not-shimmed), one decided by
// the interposer alone (SDPSHIM_ENABLE=0: shim-off, from libsdpshim.so's
// own probe), and the kernel-TCP bytes of those plain connections.
func TestStatsTraceFallbackAndKernelBytes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sdpshim trace needs root (CI runs as root)")
	}
	a := build(t)
	cli := sdpshimCLI(t)
	core := filepath.Join(filepath.Dir(a.lib), "libsdpshim-core.so")
	tr := start(t, os.Environ(), 20*time.Second, cli, "trace", "--lib", core, "--interval", "500ms", "--duration", "15s")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tr.errb.String(), "tracing kernel TCP") {
		if time.Now().After(deadline) {
			t.Fatalf("trace did not start:\n%s", tr.errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(tr.errb.String(), "libsdpshim.so") {
		t.Errorf("trace does not probe the interposer:\n%s", tr.errb.String())
	}

	rd := runDir(t)
	pair := func(client side) (srvPID, cliPID int) {
		srv := start(t, a.environ(t, side{}, rd), 20*time.Second, a.pingpong, "server", "-a", "127.0.0.1", "-p", "0")
		port := srv.listening(t)
		c := start(t, a.environ(t, client, rd), 20*time.Second, a.pingpong,
			"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-n", "3000")
		if err := c.wait(); err != nil {
			t.Fatalf("client: %v\n%s", err, c.errb.String())
		}
		return srv.cmd.Process.Pid, c.cmd.Process.Pid
	}
	srvPID, cliPID := pair(side{shim: true})
	_, offPID := pair(side{shim: true, env: []string{"SDPSHIM_ENABLE=0"}})

	// One more report, then Ctrl-C: trace drains its events, prints its
	// last report and exits 0.
	time.Sleep(700 * time.Millisecond)
	tr.cmd.Process.Signal(os.Interrupt)
	if err := tr.wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, tr.errb.String())
	}
	out := tr.out.String()
	has := func(parts ...string) bool {
		for _, l := range strings.Split(out, "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	if !has("FALLBACK", fmt.Sprintf("pid=%d ", cliPID), "reason=peer-not-shimmed(1)") {
		t.Errorf("no peer-not-shimmed fallback event for pid %d", cliPID)
	}
	if !has("FALLBACK", fmt.Sprintf("pid=%d ", offPID), "reason=shim-off(64)") {
		t.Errorf("no shim-off fallback event (the interposer's probe) for pid %d", offPID)
	}
	// The plain server's row: kernel bytes both ways, judged a candidate.
	found := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 7 && f[0] == fmt.Sprint(srvPID) && f[5] != "0B" && f[6] != "0B" && strings.Contains(l, "candidate") {
			found = true
		}
	}
	if !found {
		t.Errorf("no kernel-TCP bytes listed for the plain server %d", srvPID)
	}
	if t.Failed() {
		t.Logf("trace output:\n%s\n%s", out, tr.errb.String())
	}
}
