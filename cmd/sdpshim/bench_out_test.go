package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/bench/results"
)

// TestBenchOut runs `bench --quick --out DIR --json seed001` in process
// (its children are this test binary re-executed) and checks what it
// wrote: a results.json that parses and holds the section's figures with
// their repeats, the same on stdout (the tables on stderr), and PNGs of
// a sensible size. Figures are not judged.
func TestBenchOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the seed-001 benchmarks (about 5 s)")
	}
	dir := t.TempDir()
	code, out, errOut := runWith([]string{"SDPSHIM_POLL=adaptive"}, "bench", "--quick", "--out", dir, "--json", "seed001")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(errOut, "Unidirectional bandwidth") {
		t.Errorf("the tables are missing from stderr:\n%s", errOut)
	}
	var printed results.Run
	if err := json.Unmarshal([]byte(out), &printed); err != nil {
		t.Errorf("stdout is not the results: %v\n%s", err, out)
	}
	res, err := results.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Settings.Quick || res.Settings.Env["SDPSHIM_POLL"] != "adaptive" || res.Machine.Cores < 1 || res.Commit == "" {
		t.Errorf("run description %+v %+v, commit %q", res.Settings, res.Machine, res.Commit)
	}
	if len(res.Sections) != 1 || res.Sections[0].Name != "seed001" || res.Sections[0].Error != "" {
		t.Errorf("sections %+v", res.Sections)
	}
	if len(printed.Figures) != len(res.Figures) {
		t.Errorf("%d figures on stdout, %d in results.json", len(printed.Figures), len(res.Figures))
	}
	var repeated, papers, targets int
	for _, f := range res.Figures {
		if f.Section != "seed001" || f.Name == "" {
			t.Errorf("figure %+v", f)
		}
		if f.Shim != nil && len(f.Shim.Repeats) > 1 {
			repeated++
		}
		if f.Paper != nil {
			papers++
		}
		if f.Target != nil {
			targets++
		}
	}
	if repeated == 0 || papers == 0 || targets == 0 {
		t.Errorf("%d figures: %d with repeats, %d with the paper's value, %d with a target", len(res.Figures), repeated, papers, targets)
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	if len(pngs) != len(benchSections["seed001"].Plots) {
		t.Errorf("PNGs %v, want one per plot of seed001 (%d)", pngs, len(benchSections["seed001"].Plots))
	}
	for _, p := range pngs {
		checkPNG(t, p)
	}
}

// checkPNG checks that path decodes as a PNG of at least 300 x 200.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("%s: %d x %d pixels", path, b.Dx(), b.Dy())
	}
}

// TestBenchCompare checks --compare on two constructed results files,
// and --from redrawing one.
func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, shim *results.Values) string {
		rec := results.NewRecorder("seed000")
		rec.Add(results.Figure{Name: "throughput, 256B, statusbyte", Unit: "MB/s", Higher: true, Shim: shim})
		r := &results.Run{}
		r.Add(results.SectionRun{Name: "seed000"}, rec)
		path := filepath.Join(dir, name)
		if err := r.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	old := write("old.json", results.Of([]float64{100, 104, 102}, 102))
	cur := write("new.json", results.Of([]float64{150, 151, 152}, 151))
	code, out, errOut := runWith(nil, "bench", "--compare", old, cur)
	if code != exitOK || !strings.Contains(out, "throughput, 256B, statusbyte") || !strings.Contains(out, "+48.0%") || !strings.Contains(out, "better") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	if code, _, _ := runWith(nil, "bench", "--compare", old); code != exitUsage {
		t.Errorf("--compare with one file: exit %d, want %d", code, exitUsage)
	}
	code, out, errOut = runWith(nil, "bench", "--from", cur, "--out", filepath.Join(dir, "replot"))
	if code != exitOK || !strings.Contains(out, "results.json") {
		t.Errorf("--from: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	var r results.Run
	b, err := os.ReadFile(filepath.Join(dir, "replot", "results.json"))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || len(r.Figures) != 1 {
		t.Errorf("--from copied results: %v, %d figures", err, len(r.Figures))
	}
}
