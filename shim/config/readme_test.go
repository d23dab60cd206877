package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the env table in README.md")

// README markers around the generated table.
const (
	readmeBegin = "<!-- env-table:begin -->\n"
	readmeEnd   = "<!-- env-table:end -->"
)

// TestREADMETable fails when README.md's environment table differs from
// Markdown(); with -update it rewrites the table.
func TestREADMETable(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin := bytes.Index(data, []byte(readmeBegin))
	end := bytes.Index(data, []byte(readmeEnd))
	if begin < 0 || end < begin {
		t.Fatalf("README.md lacks the markers %q ... %q", readmeBegin, readmeEnd)
	}
	begin += len(readmeBegin)
	want := "\n" + Markdown() + "\n"
	if string(data[begin:end]) == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, data[:begin]...), want...), data[end:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the env table in %s", path)
		return
	}
	t.Errorf("README.md's environment table is out of date. Regenerate it with\n" +
		"\tgo test ./shim/config -run TestREADMETable -update\n" +
		"or paste the output of `go run ./cmd/sdpshim env --markdown` between the env-table markers.")
}
