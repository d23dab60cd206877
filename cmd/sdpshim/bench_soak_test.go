package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBenchSoakListed: the soak section is listed last and marked as run
// only when named. Its end-to-end run needs the interposer beside the
// sdpshim executable: tests/bench_soak_test.go runs it (make
// integration).
func TestBenchSoakListed(t *testing.T) {
	code, out, errOut := runWith(nil, "bench", "--list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "soak ") || !strings.HasSuffix(last, "(named only)") {
		t.Errorf("last section: %q, want soak, named only", last)
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.HasSuffix(l, "(named only)") {
			t.Errorf("%q: only the soak runs only when named", l)
		}
	}
}

// Flags may come before, between and after the section names, as in
// `sdpshim bench soak --duration 10m`.
func TestBenchFlagsAfterSections(t *testing.T) {
	for _, c := range []struct {
		args  []string
		names []string
		quick bool
		d     time.Duration
	}{
		{[]string{"soak", "--duration", "10m"}, []string{"soak"}, false, 10 * time.Minute},
		{[]string{"--quick", "soak"}, []string{"soak"}, true, 0},
		{[]string{"seed001", "--duration=2s", "soak", "--quick"}, []string{"seed001", "soak"}, true, 2 * time.Second},
		{nil, nil, false, 0},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		quick := fs.Bool("quick", false, "")
		d := fs.Duration("duration", 0, "")
		names, _, done := parseInterspersed(fs, c.args)
		if done || !slices.Equal(names, c.names) || *quick != c.quick || *d != c.d {
			t.Errorf("%q: names %q, quick %v, duration %v, done %v; want %q, %v, %v", c.args, names, *quick, *d, done, c.names, c.quick, c.d)
		}
	}
	code, _, errOut := runWith(nil, "bench", "soak", "--duration", "soon")
	if code != exitUsage || !strings.Contains(errOut, "-duration") {
		t.Errorf("a bad --duration: exit %d, %s", code, errOut)
	}
}
