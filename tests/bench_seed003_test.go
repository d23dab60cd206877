package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/sdpshim/sdpshim/bench/results"
)

// TestBenchSeed003Quick runs `sdpshim bench --quick --json seed003` end
// to end (about 30 s: the tenants program over kernel TCP and under the
// preload in three modes) and checks that the results hold every figure
// of the section, kernel TCP's beside sdpshim's, and the targets
// where they are judged. Figures are not judged.
func TestBenchSeed003Quick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the seed-003 benchmarks (about 30 s)")
	}
	need(t, "gcc")
	cmd := exec.Command(sdpshimCLI(t), "bench", "--quick", "--json", "seed003")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sdpshim bench: %v\n%s", err, stderr.String())
	}
	var run results.Run
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		t.Fatalf("results: %v\n%s", err, stdout.String())
	}
	if len(run.Sections) != 1 || run.Sections[0].Name != "seed003" || run.Sections[0].Error != "" {
		t.Fatalf("sections %+v\n%s", run.Sections, stderr.String())
	}
	figs := map[string]results.Figure{}
	for _, f := range run.Figures {
		figs[f.Name] = f
	}
	check := func(name string, kernel, target bool) {
		t.Helper()
		f, ok := figs[name]
		switch {
		case !ok:
			t.Errorf("no figure %q", name)
		case f.Shim == nil:
			t.Errorf("%s: no sdpshim value", name)
		case kernel && f.Kernel == nil:
			t.Errorf("%s: no kernel TCP value", name)
		case target != (f.Target != nil):
			t.Errorf("%s: target %+v, want one: %v", name, f.Target, target)
		}
	}
	for _, mode := range []string{"shared", "shared PREEMPT=0", "direct"} {
		judged := mode != "shared PREEMPT=0"
		for _, name := range []string{
			"D_App alone, round trip p50", "D_App alone, round trip p99",
			"D_App beside B_App, round trip p50", "D_App beside B_App, round trip p99",
			"B_App alone, throughput", "B_App beside D_App, throughput",
			"M_App alone, message rate", "M_App beside B_App, message rate", "B_App beside M_App, throughput",
			"1-stream and 16-stream tenants together, throughput",
			"1 stream's share beside 16 of the same process",
		} {
			check(name+", "+mode, true, false)
		}
		for _, name := range []string{
			"D_App p99 beside B_App / alone", "M_App rate beside B_App / alone",
			"1-stream tenant's share beside a 16-stream tenant",
		} {
			check(name+", "+mode, true, judged)
		}
	}
	check("B_App alone, throughput PREEMPT on / off, shared", false, true)
	check("B_App beside D_App, throughput PREEMPT on / off, shared", false, false) // given way by design
	check("D_App p99 beside B_App of another process / alone, direct", true, true)
	check("M_App rate beside B_App of another process / alone, direct", true, true)
	check("D_App p99 beside B_App of another process / alone, shared", true, false)
	if t.Failed() {
		t.Logf("tables:\n%s", stderr.String())
	}
}
