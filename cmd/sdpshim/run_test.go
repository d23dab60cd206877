package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWithPreloadPutsLibFirstOnce(t *testing.T) {
	got := withPreload([]string{"A=1", "LD_PRELOAD=/x/a.so:/lib/s.so /y/b.so"}, "/lib/s.so")
	want := []string{"A=1", "LD_PRELOAD=/lib/s.so /x/a.so /y/b.so"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	got = withPreload([]string{"A=1"}, "/lib/s.so")
	if !slices.Equal(got, []string{"A=1", "LD_PRELOAD=/lib/s.so"}) {
		t.Fatalf("no previous LD_PRELOAD: got %q", got)
	}
}

func TestMergeEnvReplaces(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2", "A=3"}, []string{"A=9", "C=4"})
	want := []string{"B=2", "A=9", "C=4"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run"},
		{"run", "--env", "novalue", "--", "true"},
		{"run", "--lib", "/nonexistent/libsdpshim.so", "--", "true"},
	} {
		var out, errb bytes.Buffer
		code := run(args, &Env{Stdout: &out, Stderr: &errb})
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
		if errb.Len() == 0 {
			t.Errorf("%q: no message on stderr", args)
		}
	}
}

// TestRunExecsWithPreload builds the CLI, runs `sdpshim run` on env(1) with
// a stand-in shared object as the interposer, and checks that the program
// sees LD_PRELOAD and the --env additions, and that a bad SDPSHIM_* value
// only warns.
func TestRunExecsWithPreload(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sdpshim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed; needed to build a stand-in preload library")
	}
	lib := filepath.Join(dir, "libsdpshim.so")
	src := filepath.Join(dir, "empty.c")
	if err := os.WriteFile(src, []byte("int sdpshim_standin;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "--env", "SDPSHIM_FLOW=credit", "--env", "OTHER=x y", "--", "env")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SDPSHIM_FLOW=packed"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sdpshim run env: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{"LD_PRELOAD=" + lib + "\n", "SDPSHIM_FLOW=credit\n", "OTHER=x y\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "SDPSHIM_FLOW=packed") {
		t.Errorf("--env did not replace the inherited value:\n%s", s)
	}

	bad := exec.Command(bin, "run", "--env", "SDPSHIM_BLOCKS=3x", "--", "true")
	bad.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err = bad.CombinedOutput()
	if err != nil {
		t.Fatalf("a bad SDPSHIM value must only warn: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SDPSHIM_BLOCKS") {
		t.Errorf("no warning naming SDPSHIM_BLOCKS:\n%s", out)
	}
}
