package main

import (
	"bytes"
	"strings"
	"testing"
)

// runWith runs the CLI in process with environ and returns the exit code
// and both outputs.
func runWith(environ []string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &Env{Stdout: &out, Stderr: &errOut, Environ: environ})
	return code, out.String(), errOut.String()
}

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // substring; "" = must be empty
		stderr string
	}{
		{nil, exitUsage, "", "usage: sdpshim COMMAND"},
		{[]string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"--verbose", "env"}, exitUsage, "", "unknown flag --verbose"},
		{[]string{"help"}, exitOK, "env ", ""},
		{[]string{"--help"}, exitOK, "help ", ""},
		{[]string{"-h"}, exitOK, "commands:", ""},
		{[]string{"help", "env"}, exitOK, "usage: sdpshim env [--markdown]", ""},
		{[]string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{[]string{"help", "env", "extra"}, exitUsage, "", "usage: sdpshim help"},
	} {
		code, stdout, stderr := runWith(nil, tc.args...)
		if code != tc.code || !contains(stdout, tc.stdout) || !contains(stderr, tc.stderr) {
			t.Errorf("sdpshim %q: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q",
				tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// contains is strings.Contains, except that want "" requires got "".
func contains(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}

// TestCommandsComplete checks every registered command is listed by help.
func TestCommandsComplete(t *testing.T) {
	_, stdout, _ := runWith(nil, "help")
	for name, c := range commands {
		if c.Summary == "" || !strings.Contains(stdout, name+" ") || !strings.HasPrefix(c.Usage, "sdpshim "+name) {
			t.Errorf("command %s: summary %q usage %q, listed %v", name, c.Summary, c.Usage, strings.Contains(stdout, name))
		}
	}
}
