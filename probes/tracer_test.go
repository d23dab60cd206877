package probes

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// load loads the tracer, skipping the test when it cannot run here.
func load(t *testing.T, o Options) *Tracer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("eBPF tracing needs root")
	}
	tr, err := Load(o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestKernelBytes makes a plain loopback TCP connection and finds its
// bytes, keyed by this pid and the socket's cookie.
func TestKernelBytes(t *testing.T) {
	tr := load(t, Options{})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 100000
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		k, _ := io.Copy(io.Discard, c)
		got <- k
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cookie := socketCookie(t, c.(*net.TCPConn))
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if k := <-got; k != n {
		t.Fatalf("server read %d bytes, want %d", k, n)
	}
	conns, err := tr.Conns()
	if err != nil {
		t.Fatal(err)
	}
	var sent, received bool
	for _, cb := range conns {
		if cb.PID != uint32(os.Getpid()) {
			continue
		}
		if cb.Cookie == cookie && cb.Sent == n && cb.Tuple.Remote.String() == ln.Addr().String() {
			sent = true
		}
		if cb.Received == n && cb.Tuple.Local.String() == ln.Addr().String() {
			received = true
		}
	}
	if !sent || !received {
		t.Errorf("kernel bytes not found (sent %v, received %v) among %+v", sent, received, conns)
	}
	states, err := tr.States()
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, s := range states {
		if s.Cookie == cookie {
			seen = s.PID == uint32(os.Getpid()) && s.Tuple.Remote.String() == ln.Addr().String()
		}
	}
	if !seen {
		t.Errorf("no state change with this pid for cookie %d: %+v", cookie, states)
	}
}

func socketCookie(t *testing.T, c *net.TCPConn) uint64 {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	var cerr error
	rc.Control(func(fd uintptr) {
		cookie, cerr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	})
	if cerr != nil {
		t.Fatal(cerr)
	}
	return cookie
}

// buildProbeCall compiles testdata/probecall.c with c/probe.c.
func buildProbeCall(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler:", err)
	}
	exe := filepath.Join(t.TempDir(), "probecall")
	out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-Ic", "-o", exe, "testdata/probecall.c", "c/probe.c").CombinedOutput()
	if err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return exe
}

// runProbeCall runs it and returns the mean cost of one probe call.
func runProbeCall(t *testing.T, exe string, args ...string) (float64, int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probecall: %v", err)
	}
	f := strings.Fields(string(out))
	ns, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil {
		t.Fatalf("probecall printed %q", out)
	}
	return ns, cmd.Process.Pid
}

// TestProbeFirstInstruction checks the probes start with the NOP that
// lets a uprobe replace them cheaply.
func TestProbeFirstInstruction(t *testing.T) {
	exe := buildProbeCall(t)
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", exe).Output()
	if err != nil {
		t.Skip("objdump:", err)
	}
	for _, sym := range []string{SymbolFallback, SymbolAccelerated} {
		_, body, ok := strings.Cut(string(out), "<"+sym+">:\n")
		lines := strings.SplitN(body, "\n", 2)
		if !ok || !strings.Contains(lines[0], "nop") {
			t.Errorf("%s does not start with a nop: %q", sym, lines[0])
		}
	}
}

// TestUprobe calls the probe from a C program and sees the events; it
// logs the cost of a call without and with the uprobe attached.
func TestUprobe(t *testing.T) {
	exe := buildProbeCall(t)
	if os.Geteuid() != 0 {
		t.Skip("eBPF tracing needs root")
	}
	bare, _ := runProbeCall(t, exe, "1", "5", "7", "10000000")
	tr := load(t, Options{Library: exe})
	const calls = 3000 // the ring buffer holds them all, however slow the reader
	events := make(chan Event, 1024)
	go func() {
		defer close(events)
		for {
			ev, err := tr.ReadEvent()
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	_, pid := runProbeCall(t, exe, "8", "42", "0xfeedface", strconv.Itoa(calls))

	var fallbacks int
	timeout := time.After(5 * time.Second)
wait:
	for {
		var ev Event
		select {
		case ev = <-events:
		case <-timeout:
			t.Fatalf("saw %d of %d fallback events and no accelerated event (%d lost)", fallbacks, calls, tr.EventsLost())
		}
		if ev.PID != uint32(pid) {
			continue // another process running a probe
		}
		if ev.Kind == EventAccelerated {
			if ev.Code != 1 || ev.FD != 42 || ev.Cookie != 0xfeedface || ev.Comm != "probecall" {
				t.Errorf("accelerated event %+v", ev)
			}
			break wait
		}
		if ev.Kind != EventFallback || ev.Code != 8 || ev.FD != 42 || ev.Cookie != 0xfeedface {
			t.Fatalf("event %+v, want fallback reason 8 fd 42 cookie 0xfeedface", ev)
		}
		fallbacks++
	}
	if fallbacks != calls {
		t.Errorf("saw %d fallback events (%d lost), want %d", fallbacks, tr.EventsLost(), calls)
	}
	// The cost with the uprobe attached (events beyond the ring's room are
	// dropped and counted, which costs the same).
	probed, _ := runProbeCall(t, exe, "8", "42", "1", "100000")
	t.Logf("probe call: %.2f ns unprobed, %.0f ns with the uprobe attached", bare, probed)
}

// TestNotPermitted loads as a user without privilege: ErrNotPermitted.
// As root it runs itself again as nobody.
func TestNotPermitted(t *testing.T) {
	if os.Geteuid() != 0 {
		_, err := Load(Options{})
		if !errors.Is(err, ErrNotPermitted) {
			t.Fatalf("Load as uid %d: %v, want ErrNotPermitted", os.Geteuid(), err)
		}
		return
	}
	exe := copyForOthers(t)
	cmd := exec.Command(exe, "-test.run=^TestNotPermitted$", "-test.v")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNotPermitted") {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
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
	dir, err := os.MkdirTemp("", "probestest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "probes.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}
