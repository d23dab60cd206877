package main

import (
	"strings"
	"testing"
)

// TestBenchSeed001Quick runs the seed-001 section end to end in quick
// mode: its children are this test binary re-executed (bench_seed001.go's
// init serves them). Figures are not judged; the tables must all be
// there.
func TestBenchSeed001Quick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the seed-001 benchmarks (about 4 s)")
	}
	code, out, errOut := runWith(nil, "bench", "--quick", "seed001")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"Unidirectional bandwidth, 64 KiB receive buffer",
		"Unidirectional bandwidth, 256 KiB receive buffer",
		"Buffer utilisation",
		"Communication progress, 64 KiB receive buffer, the receiver reads as fast as it can",
		"Communication progress, 256 KiB receive buffer, the receiver paced",
		"target: packed bandwidth / credit",
		"target: progress, 10 ms computation: nicassist",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
