package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGofmt fails when a tracked Go file is not gofmt-clean.
func TestGofmt(t *testing.T) {
	out, err := exec.Command("gofmt", "-l", "..").CombinedOutput()
	if err != nil {
		t.Fatalf("gofmt: %v\n%s", err, out)
	}
	if files := strings.TrimSpace(string(out)); files != "" {
		t.Errorf("not gofmt-clean (run gofmt -w):\n%s", files)
	}
}
