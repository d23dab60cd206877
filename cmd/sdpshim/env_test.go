package main

import (
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/shim/config"
)

func TestEnvGood(t *testing.T) {
	code, stdout, stderr := runWith([]string{"SDPSHIM_FLOW=credit", "SDPSHIM_BLOCKS=128", "HOME=/root"}, "env")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(config.Knobs())+1 || !strings.HasPrefix(lines[0], "VARIABLE") {
		t.Fatalf("want a header and one line per knob, got:\n%s", stdout)
	}
	for i, k := range config.Knobs() {
		if !strings.HasPrefix(lines[i+1], k.Name+" ") || !strings.Contains(lines[i+1], k.Meaning) {
			t.Errorf("line %q does not describe %s", lines[i+1], k.Name)
		}
	}
	for name, current := range map[string]string{"SDPSHIM_FLOW": " credit ", "SDPSHIM_BLOCKS": " 128 "} {
		if line := findLine(stdout, name+" "); !strings.Contains(line, current) {
			t.Errorf("%s line lacks its current value %q: %q", name, current, line)
		}
	}
	if strings.Contains(stdout, "(invalid)") {
		t.Errorf("a valid environment was marked invalid:\n%s", stdout)
	}
}

func TestEnvBad(t *testing.T) {
	environ := []string{"SDPSHIM_BLOCKS=3x", "SDPSHIM_POLL_BETA=1", "SDPSHIM_BLOKS=8", "SDPSHIM_RUNDIR=a\tb"}
	code, stdout, stderr := runWith(environ, "env")
	if code != exitFailure || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want %d", code, stderr, exitFailure)
	}
	for _, k := range config.Knobs() {
		if findLine(stdout, k.Name+" ") == "" {
			t.Errorf("%s not printed", k.Name)
		}
	}
	for name, current := range map[string]string{
		"SDPSHIM_BLOCKS":    "3x (invalid)",
		"SDPSHIM_POLL_BETA": "1 (invalid)",
		"SDPSHIM_RUNDIR":    `"a\tb" (invalid)`,
	} {
		if line := findLine(stdout, name+" "); !strings.Contains(line, current) {
			t.Errorf("%s line %q lacks %q", name, line, current)
		}
	}
	for _, want := range []string{
		`sdpshim: SDPSHIM_BLOCKS="3x": expected auto or a power of two from 2 to 4096`,
		`sdpshim: SDPSHIM_POLL_BETA="1": expected a number above 0 and below 1`,
		`sdpshim: SDPSHIM_BLOKS="8": not a known variable (did you mean SDPSHIM_BLOCKS?)`,
		"sdpshim: with this environment " + config.Consequence,
	} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestEnvMarkdown(t *testing.T) {
	// The environment is ignored: the table documents, it does not check.
	code, stdout, stderr := runWith([]string{"SDPSHIM_BLOCKS=3x"}, "env", "--markdown")
	if code != exitOK || stderr != "" || stdout != config.Markdown() {
		t.Errorf("exit %d, stderr %q, stdout differs from config.Markdown: %q", code, stderr, stdout)
	}
}

func TestEnvUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"env", "--bogus"}, exitUsage},
		{[]string{"env", "extra"}, exitUsage},
		{[]string{"env", "-h"}, exitOK},
	} {
		code, _, stderr := runWith(nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, "usage: sdpshim env") {
			t.Errorf("%q: exit %d stderr %q, want exit %d and usage", tc.args, code, stderr, tc.code)
		}
	}
}

// findLine returns the first line of out that starts with prefix, or "".
func findLine(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
