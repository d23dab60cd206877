package config

import (
	"errors"
	"strings"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	_, err := load([]string{"SDPSHIM_BLOCKS=3x"}, testUID, testSendBuf)
	want := `sdpshim: SDPSHIM_BLOCKS="3x": expected auto or a power of two from 2 to 4096; the shim is disabled, the program runs on plain TCP`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// TestErrorEveryProblemOneLine checks that all problems are reported,
// in table order with unknown names last, one line each, whatever the
// bytes in names and values.
func TestErrorEveryProblemOneLine(t *testing.T) {
	long := strings.Repeat("é", 100)
	_, err := load([]string{
		"SDPSHIM_BLOKS=8",
		"SDPSHIM_POLL=spin\nnewline",
		"SDPSHIM_FLOW=" + long,
		"SDPSHIM_X\ty=1",
		"SDPSHIM_ALLOW_UIDS=1,x",
	}, testUID, testSendBuf)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %v", err)
	}
	var names []string
	for _, p := range e.Problems {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, " "), "SDPSHIM_FLOW SDPSHIM_POLL SDPSHIM_ALLOW_UIDS SDPSHIM_BLOKS SDPSHIM_X\ty"; got != want {
		t.Errorf("problem order %q, want %q", got, want)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(e.Problems) {
		t.Fatalf("%d lines for %d problems:\n%s", len(lines), len(e.Problems), err)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "sdpshim: SDPSHIM_") && !strings.HasPrefix(line, `sdpshim: "SDPSHIM_`) ||
			!strings.HasSuffix(line, Consequence) || len(line) > 400 || strings.ContainsAny(line, "\t\r") {
			t.Errorf("bad line %q", line)
		}
	}
	for _, want := range []string{
		`SDPSHIM_BLOKS="8": not a known variable (did you mean SDPSHIM_BLOCKS?)`,
		`"SDPSHIM_X\ty"="1": not a known variable`,
		`SDPSHIM_POLL="spin\nnewline": expected adaptive, busy, event or hybrid`,
		`...": expected credit, packed or nicassist`,
		`(item 2 "x" is not a uid)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
	if !e.Has("SDPSHIM_POLL") || e.Has("SDPSHIM_BLOCKS") {
		t.Error("Has is wrong")
	}
}

func TestSuggest(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"SDPSHIM_BLOKS", "SDPSHIM_BLOCKS"},
		{"SDPSHIM_BLOCKSIZE", "SDPSHIM_BLOCK_SIZE"},
		{"sdpshim_stats", "SDPSHIM_STATS"},
		{"SDPSHIM_POLLMIN", "SDPSHIM_POLL_MIN"},
		{"SDPSHIM_VERBOSE", ""},
	} {
		got := suggest(tc.name)
		if tc.want == "" && got != "" || tc.want != "" && got != "did you mean "+tc.want+"?" {
			t.Errorf("suggest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
