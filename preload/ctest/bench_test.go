package ctest

import (
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestPassthroughOverhead reports (does not assert) what the library costs
// a call on an UNMANAGED fd and a process that makes no TCP socket. Run with
// -v to see the figures:
//   - wrapbench: the exported write() with the real one replaced by a stub,
//     minus the stub called directly: the interposer's own instructions;
//   - bench: one-byte pipe write+read under LD_PRELOAD, the linked names
//     (interposed) against libc's own functions in the same process;
//   - /bin/true run to exit, without and with LD_PRELOAD, interleaved.
func TestPassthroughOverhead(t *testing.T) {
	b := artefacts(t)
	r := runProg(t, b.env(plain, ""), b.wrap)
	if r.err != nil {
		t.Fatalf("wrapbench: %v %s", r.err, r.stderr)
	}
	t.Logf("wrapper alone (no syscall), ns per call: %s", r.stdout)
	re := regexp.MustCompile(`interposed_ns ([\d.]+) direct_ns ([\d.]+) overhead_ns (-?[\d.]+)`)
	for _, s := range []setup{plain, passthrough} {
		r := runProg(t, b.env(s, ""), b.bench, "20000", "11") // well inside runProg's minute on a loaded machine
		m := re.FindStringSubmatch(r.stdout)
		if r.err != nil || m == nil {
			t.Fatalf("bench: %v %s %s", r.err, r.stdout, r.stderr)
		}
		t.Logf("%-11s pipe write+read per call: linked names %s ns, libc direct %s ns, difference %s ns", s, m[1], m[2], m[3])
	}
	const batches, per = 10, 20
	best := map[setup]time.Duration{}
	for i := 0; i < batches; i++ {
		for _, s := range []setup{plain, passthrough} {
			env := b.env(s, "")
			start := time.Now()
			for j := 0; j < per; j++ {
				cmd := exec.Command("/bin/true")
				cmd.Env = env
				if err := cmd.Run(); err != nil {
					t.Fatal(err)
				}
			}
			if d := time.Since(start) / per; best[s] == 0 || d < best[s] {
				best[s] = d
			}
		}
	}
	t.Logf("/bin/true start to exit (best batch mean): plain %v, passthrough %v", best[plain], best[passthrough])
}
