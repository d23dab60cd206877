package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func TestLogOffIsSilent(t *testing.T) {
	var stderr bytes.Buffer
	log, file, err := openLog(mustLoad(t), &stderr)
	if err != nil || file != nil {
		t.Fatalf("openLog: %v %v", file, err)
	}
	if log.Out != io.Discard || log.IsLevelEnabled(logrus.ErrorLevel) {
		t.Errorf("off logger: out %T, error enabled %v", log.Out, log.IsLevelEnabled(logrus.ErrorLevel))
	}
	allocs := testing.AllocsPerRun(100, func() {
		log.Debug("not formatted")
		log.Error("not formatted")
	})
	if allocs != 0 {
		t.Errorf("a disabled log call allocated %v times", allocs)
	}
	log.Fatal("must not exit")
	if stderr.Len() != 0 {
		t.Errorf("off logger wrote %q", stderr.String())
	}
}

func TestLogToStderr(t *testing.T) {
	var stderr bytes.Buffer
	log, file, err := openLog(mustLoad(t, "SDPSHIM_LOG_LEVEL=info"), &stderr)
	if err != nil || file != nil {
		t.Fatalf("openLog: %v %v", file, err)
	}
	log.Debug("hidden")
	log.Info("shown")
	log.Fatal("fatal does not exit")
	out := stderr.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, "msg=shown") ||
		!strings.Contains(out, "fatal does not exit") || !strings.Contains(out, "pid=") {
		t.Errorf("stderr got %q", out)
	}
}

func TestLogToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sdpshim.log")
	c := mustLoad(t, "SDPSHIM_LOG_LEVEL=debug", "SDPSHIM_LOG_FILE="+path)
	for _, msg := range []string{"first", "second"} {
		log, file, err := openLog(c, io.Discard)
		if err != nil || file == nil {
			t.Fatalf("openLog: %v %v", file, err)
		}
		flags, err := unix.FcntlInt(file.Fd(), unix.F_GETFL, 0)
		if err != nil || flags&unix.O_APPEND == 0 {
			t.Errorf("flags %#x (%v): want O_APPEND", flags, err)
		}
		fdflags, err := unix.FcntlInt(file.Fd(), unix.F_GETFD, 0)
		if err != nil || fdflags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd flags %#x (%v): want FD_CLOEXEC", fdflags, err)
		}
		log.Debug(msg)
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); strings.Count(got, "\n") != 2 || !strings.Contains(got, "msg=first") ||
		!strings.Contains(got, "msg=second") {
		t.Errorf("log file holds %q, want both entries", got)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v (%v), want 0600", info.Mode(), err)
	}
}

func TestLogBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "sdpshim.log")
	var stderr bytes.Buffer
	log, file, err := openLog(mustLoad(t, "SDPSHIM_LOG_LEVEL=warn", "SDPSHIM_LOG_FILE="+path), &stderr)
	var e *Error
	if !errors.As(err, &e) || !e.Has("SDPSHIM_LOG_FILE") || file != nil {
		t.Fatalf("want a SDPSHIM_LOG_FILE problem, got %v %v", file, err)
	}
	if !strings.Contains(err.Error(), "no such file or directory") || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("error %q", err)
	}
	log.Warn("still logged")
	if !strings.Contains(stderr.String(), "still logged") {
		t.Errorf("fallback logger wrote %q to stderr", stderr.String())
	}
}
