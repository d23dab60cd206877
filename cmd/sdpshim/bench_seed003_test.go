package main

import (
	"strings"
	"testing"
)

// TestBenchSeed003Listed: the seed-003 section is registered between
// seed001 and waiting, so `make bench` runs it. Its end-to-end run needs
// the interposer beside the sdpshim executable, which a test binary does
// not have: tests/bench_seed003_test.go runs it (make integration).
func TestBenchSeed003Listed(t *testing.T) {
	code, out, errOut := runWith(nil, "bench", "--list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		names = append(names, strings.Fields(l)[0])
	}
	got := strings.Join(names, " ")
	if !strings.Contains(got, "seed001 seed003 waiting") {
		t.Errorf("sections in order: %s", got)
	}
}
