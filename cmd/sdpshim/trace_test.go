package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTrace runs sdpshim trace (root) while a C program fires the
// fallback probe and this process makes a plain loopback connection: the
// event is printed with its reason, and the connection with its kernel
// bytes as a candidate (neither end runs the shim).
func TestTrace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sdpshim trace needs root")
	}
	probecall := buildProbeCall(t)
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"trace", "--lib", probecall, "--interval", "300ms", "--duration", "2500ms"},
			&Env{Stdout: &stdout, Stderr: &stderr})
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "tracing kernel TCP"); {
		if time.Now().After(deadline) {
			t.Fatalf("trace did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	cmd := exec.Command(probecall, "10", "5", "123", "1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("probecall: %v %s", err, out)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write(make([]byte, 64<<10))
	c.Close()

	if got := <-code; got != exitOK {
		t.Fatalf("trace exit %d, stderr:\n%s", got, stderr.String())
	}
	out := stdout.String()
	fallback := "FALLBACK    pid=" + strconv.Itoa(cmd.Process.Pid) + " comm=probecall fd=5 reason=disabled-by-setting(10) cookie=123"
	if !strings.Contains(out, fallback) {
		t.Errorf("no line %q in:\n%s", fallback, out)
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && f[0] == strconv.Itoa(os.Getpid()) && f[3] == ln.Addr().String() {
			row = line
		}
	}
	if !strings.Contains(row, "64.0KiB") || !strings.Contains(row, "candidate (neither end runs the shim)") {
		t.Errorf("client's kernel bytes not listed as a candidate (row %q) in:\n%s", row, out)
	}
}

// TestTraceNotRoot: without privilege, one clear line and exit 1. As root
// the test runs itself again as nobody.
func TestTraceNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		code, stdout, stderr := runWith(nil, "trace", "--duration", "1s")
		if code != exitFailure || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "needs root") {
			t.Fatalf("as uid %d: exit %d, stdout %q, stderr %q", os.Geteuid(), code, stdout, stderr)
		}
		return
	}
	exe := copyForOthers(t)
	cmd := exec.Command(exe, "-test.run=^TestTraceNotRoot$", "-test.v")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTraceNotRoot") {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
}

// buildProbeCall compiles probes/testdata/probecall.c, a program that
// calls the probe functions.
func buildProbeCall(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler:", err)
	}
	exe := filepath.Join(t.TempDir(), "probecall")
	src := filepath.Join("..", "..", "probes")
	out, err := exec.Command(cc, "-O2", "-I"+filepath.Join(src, "c"), "-o", exe,
		filepath.Join(src, "testdata", "probecall.c"), filepath.Join(src, "c", "probe.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return exe
}

// copyForOthers copies the test binary where another uid can run it.
func copyForOthers(t *testing.T) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "clitest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "sdpshim.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}
