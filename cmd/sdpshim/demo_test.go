package main

import (
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// demoSrc is the directory of the demo programs, from this package.
const demoSrc = "../../demo"

// fastDemo are the flags of a quick demo: tiny fixed counts, one repeat,
// and kernel TCP in both columns (no interposer).
var fastDemo = []string{"--no-preload", "--count", "200", "--warmup", "10", "--repeats", "1", "--timeout", "20s"}

func needGCC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed: the demo programs cannot be built")
	}
}

// checkDemoRows checks that rows hold every row of the table, in order,
// with sane numbers in both columns.
func checkDemoRows(t *testing.T, rows []demoRow) {
	t.Helper()
	if len(rows) != len(demoRowSpecs) {
		t.Fatalf("%d rows, want %d", len(rows), len(demoRowSpecs))
	}
	byName := map[string]demoRow{}
	for i, r := range rows {
		spec := demoRowSpecs[i]
		byName[r.Name] = r
		if r.Name != spec.name || r.Unit != spec.unit {
			t.Errorf("row %d is %s in %s, want %s in %s", i, r.Name, r.Unit, spec.name, spec.unit)
		}
		for col, v := range map[string]*float64{"kernel": r.Kernel, "sdpshim": r.Sdpshim} {
			if v == nil {
				t.Errorf("%s: no %s value", r.Name, col)
				continue
			}
			lo, hi := 0.01, 1e6 // us: 10 ns to 1 s; MB/s: 10 kB/s to 1 TB/s
			if math.IsNaN(*v) || *v < lo || *v > hi {
				t.Errorf("%s: %s = %v %s is not sane", r.Name, col, *v, r.Unit)
			}
		}
		if r.Speedup == nil || *r.Speedup <= 0 || math.IsInf(*r.Speedup, 0) {
			t.Errorf("%s: speed-up %v", r.Name, r.Speedup)
		}
		if r.Unit == "MB/s" && (r.KernelMsgs == nil || r.ShimMsgs == nil || *r.KernelMsgs <= 0) {
			t.Errorf("%s: no messages/s", r.Name)
		}
		if r.Via == viaAccelerated {
			t.Errorf("%s: sdpshim column reported accelerated without the interposer", r.Name)
		}
	}
	for _, size := range []string{"64B", "4KiB"} {
		p50, p99 := byName["latency_"+size+"_p50"], byName["latency_"+size+"_p99"]
		if p50.Kernel != nil && p99.Kernel != nil && *p99.Kernel < *p50.Kernel {
			t.Errorf("latency %s: kernel p99 %v below p50 %v", size, *p99.Kernel, *p50.Kernel)
		}
	}
}

// TestDemoFastJSON builds the programs from source and runs the demo over
// kernel TCP in both columns, then checks the JSON report.
func TestDemoFastJSON(t *testing.T) {
	needGCC(t)
	start := time.Now()
	code, stdout, stderr := runWith(os.Environ(), append([]string{"demo", "--json", "--src", demoSrc}, fastDemo...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep demoReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("decode: %v\n%s", err, stdout)
	}
	checkDemoRows(t, rep.Rows)
	if want := len(demoMeasures) * 2; len(rep.Runs) != want {
		t.Errorf("%d runs, want %d", len(rep.Runs), want)
	}
	for _, r := range rep.Runs {
		if r.Error != "" || r.Transport == nil {
			t.Errorf("run %+v failed or has no transport", r)
		}
	}
	if len(rep.Errors) != 0 || !strings.Contains(rep.Settings.ShimColumn, "stand-in") {
		t.Errorf("errors %q, sdpshim column %q", rep.Errors, rep.Settings.ShimColumn)
	}
	if len(rep.Transport) == 0 || !strings.Contains(strings.Join(rep.Transport, "\n"), "shim's own report") {
		t.Errorf("transport lines %q lack the shim's own report", rep.Transport)
	}
	t.Logf("fast demo took %v", time.Since(start))
}

// TestDemoTablePrebuilt builds the programs the way a Makefile would and
// runs the text table with --bin.
func TestDemoTablePrebuilt(t *testing.T) {
	needGCC(t)
	bin := t.TempDir()
	for _, n := range []string{"pingpong", "stream"} {
		c := exec.Command("gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", filepath.Join(bin, n), filepath.Join(demoSrc, n+".c"))
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", n, err, out)
		}
	}
	code, stdout, stderr := runWith(os.Environ(), append([]string{"demo", "--bin", bin}, fastDemo...)...)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, spec := range demoRowSpecs {
		if !strings.Contains(stdout, spec.label) {
			t.Errorf("table lacks row %q:\n%s", spec.label, stdout)
		}
	}
	for _, want := range []string{"kernel TCP", "sdpshim", "speed-up", "stand-in", "the shim's own report: not available"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "error") {
		t.Errorf("table shows an error:\n%s", stdout)
	}
}

func TestDemoMissingInterposer(t *testing.T) {
	code, stdout, stderr := runWith(os.Environ(), "demo", "--lib", "/nonexistent/libsdpshim.so")
	if code != exitFailure || stdout != "" {
		t.Fatalf("exit %d, stdout %q; want %d and nothing", code, stdout, exitFailure)
	}
	for _, want := range []string{"/nonexistent/libsdpshim.so", "make", "--no-preload"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestDemoUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--repeats", "0"},
		{"demo", "--duration", "0s"},
		{"demo", "--bin", "x", "--src", "y"},
		{"demo", "--no-preload", "--lib", "/x.so"},
		{"demo", "extra"},
		{"demo", "--env", "novalue"},
	} {
		code, _, stderr := runWith(nil, args...)
		if code != exitUsage || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, stderr, exitUsage)
		}
	}
}

func TestDemoMissingSources(t *testing.T) {
	code, _, stderr := runWith(os.Environ(), "demo", "--no-preload", "--src", t.TempDir())
	if code != exitFailure || !strings.Contains(stderr, "cannot find pingpong.c") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestDemoJudge checks the transport verdicts: the kernel's counters
// never make an early or thin sample into "accelerated", and the shim's
// own answer wins when it has one.
func TestDemoJudge(t *testing.T) {
	d := &demo{}
	t0 := time.Now()
	end := t0.Add(time.Second)
	at := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Second))) }
	for _, tc := range []struct {
		s    demoSamples
		app  uint64
		want string
	}{
		{demoSamples{}, 1000, viaUnknown},
		{demoSamples{n: 50, maxBytes: 990, last: at(0.98)}, 1000, viaKernel},
		{demoSamples{n: 2, maxBytes: 600, last: at(0.1)}, 1000, viaKernel},
		{demoSamples{n: 50, maxBytes: 10, last: at(0.98)}, 1000000, viaAccelerated},
		{demoSamples{n: 10, maxBytes: 10, last: at(0.3)}, 1000000, viaUnknown}, // too early
		{demoSamples{n: 2, maxBytes: 10, last: at(0.95)}, 1000000, viaUnknown}, // too few
		{demoSamples{n: 50, maxBytes: 300000, last: at(0.98)}, 1000000, viaMixed},
		{demoSamples{n: 50, maxBytes: 0, last: at(0.98)}, 0, viaUnknown},
		{demoSamples{n: 50, maxBytes: 990, last: at(0.98), shimKnown: true,
			shim: demoShimAnswer{Known: true, Accelerated: true}}, 1000, viaAccelerated},
		{demoSamples{shimKnown: true, shim: demoShimAnswer{Known: true, Detail: "fallback: peer not shimmed"}}, 1000, viaKernel},
	} {
		got := d.judge(tc.s, tc.app, t0, end)
		if got.Via != tc.want {
			t.Errorf("judge(%+v, %d) = %q (%s), want %q", tc.s, tc.app, got.Via, got.Why, tc.want)
		}
	}
}

func TestWithoutShimPreload(t *testing.T) {
	got := withoutShimPreload([]string{"A=1", "LD_PRELOAD=/b/libsdpshim.so:/x/a.so", "B=2"})
	if want := []string{"A=1", "LD_PRELOAD=/x/a.so", "B=2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	got = withoutShimPreload([]string{"LD_PRELOAD=/b/libsdpshim.so"})
	if len(got) != 0 {
		t.Errorf("got %q, want nothing", got)
	}
}

func TestMedian(t *testing.T) {
	if median(nil) != nil {
		t.Error("median of nothing is not nil")
	}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := *median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestKernelBytesReceived checks the sock_diag reader on a connection of
// this process.
func TestKernelBytesReceived(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.Write(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	got, found, err := kernelBytesReceived(port)
	if err != nil {
		t.Skipf("sock_diag unusable here: %v", err)
	}
	if !found || got != 5000 {
		t.Fatalf("kernelBytesReceived(%d) = %d, %v; want 5000, true", port, got, found)
	}
}
