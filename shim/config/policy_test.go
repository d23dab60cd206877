package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFallback(t *testing.T) {
	c := mustLoad(t)
	if got, reason := Fallback(c, nil); !got.Enabled || reason != "" {
		t.Errorf("no error: Enabled %v reason %q", got.Enabled, reason)
	}
	got, reason := Fallback(c, errors.New("sdpshim: broken"))
	if got.Enabled || reason != "sdpshim: broken" {
		t.Errorf("error: Enabled %v reason %q", got.Enabled, reason)
	}
}

func TestOpenGood(t *testing.T) {
	var stderr bytes.Buffer
	rt := open([]string{"SDPSHIM_FLOW=credit"}, testUID, &stderr)
	defer rt.Close()
	if !rt.Config.Enabled || rt.Reason != "" || rt.Log == nil || stderr.Len() != 0 {
		t.Errorf("Enabled %v Reason %q stderr %q", rt.Config.Enabled, rt.Reason, stderr.String())
	}
	rt = open([]string{"SDPSHIM_ENABLE=0"}, testUID, &stderr)
	if rt.Config.Enabled || rt.Reason != "" || stderr.Len() != 0 {
		t.Errorf("ENABLE=0: Enabled %v Reason %q stderr %q", rt.Config.Enabled, rt.Reason, stderr.String())
	}
}

// TestOpenBadSilentLog checks that a rejected configuration is reported
// on stderr even with logging off, once, one line per problem.
func TestOpenBadSilentLog(t *testing.T) {
	var stderr bytes.Buffer
	rt := open([]string{"SDPSHIM_BLOCKS=3x", "SDPSHIM_LOG_LEVEL=loud"}, testUID, &stderr)
	defer rt.Close()
	if rt.Config.Enabled {
		t.Error("a bad configuration left the shim enabled")
	}
	want := `sdpshim: SDPSHIM_BLOCKS="3x": expected auto or a power of two from 2 to 4096; ` + Consequence + "\n" +
		`sdpshim: SDPSHIM_LOG_LEVEL="loud": expected off, panic, fatal, error, warn, info, debug or trace; ` + Consequence + "\n"
	if stderr.String() != want || rt.Reason+"\n" != want {
		t.Errorf("stderr:\n%s\nReason:\n%s\nwant:\n%s", stderr.String(), rt.Reason, want)
	}
}

// TestOpenBadToLogFile checks that the reason goes to the log file when
// the user asked for one, and not to stderr.
func TestOpenBadToLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sdpshim.log")
	var stderr bytes.Buffer
	rt := open([]string{"SDPSHIM_POLL=spin", "SDPSHIM_LOG_LEVEL=error", "SDPSHIM_LOG_FILE=" + path}, testUID, &stderr)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Config.Enabled || stderr.Len() != 0 || !strings.Contains(string(data), "SDPSHIM_POLL") ||
		!strings.Contains(string(data), "level=error") {
		t.Errorf("Enabled %v stderr %q log %q", rt.Config.Enabled, stderr.String(), data)
	}
}

// TestOpenBadLogFile checks that a log file that cannot be opened
// disables the shim and is reported, without crashing.
func TestOpenBadLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "sdpshim.log")
	var stderr bytes.Buffer
	rt := open([]string{"SDPSHIM_LOG_LEVEL=info", "SDPSHIM_LOG_FILE=" + path}, testUID, &stderr)
	defer rt.Close()
	if rt.Config.Enabled || !strings.Contains(rt.Reason, "SDPSHIM_LOG_FILE") ||
		!strings.Contains(stderr.String(), "SDPSHIM_LOG_FILE") || rt.LogFile != nil {
		t.Errorf("Enabled %v Reason %q stderr %q", rt.Config.Enabled, rt.Reason, stderr.String())
	}
}
