package soak

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
)

func TestParseReport(t *testing.T) {
	r, err := parseReport("noise\n{\"conns\":3,\"completed\":2,\"bytes_out\":10,\"bytes_in\":20,\"mismatches\":1,\"hangs\":0,\"errors\":0,\"stuck\":0}\n")
	if err != nil || r.Conns != 3 || r.Completed != 2 || r.BytesIn != 20 || r.Mismatches != 1 {
		t.Errorf("report %+v, %v", r, err)
	}
	if _, err := parseReport("soak: listen: Address in use"); err == nil {
		t.Error("a report that is not JSON parsed")
	}
}

func TestRows(t *testing.T) {
	for _, c := range []struct{ n, rows int }{{0, 0}, {1, 1}, {5, 5}, {21, 21}, {22, 12}, {101, 21}, {1000, 21}} {
		got := rows(c.n)
		if len(got) != c.rows {
			t.Errorf("rows(%d): %d rows %v, want %d", c.n, len(got), got, c.rows)
		}
		if c.n > 0 && (got[0] != 0 || got[len(got)-1] != c.n-1) {
			t.Errorf("rows(%d) = %v: want the first and the last", c.n, got)
		}
	}
}

func TestSampleSelf(t *testing.T) {
	u, err := sample(os.Getpid())
	if err != nil || u.rssKB <= 0 || u.fds < 3 {
		t.Errorf("sample: %+v, %v", u, err)
	}
}

// testColumns are a clean kernel column and a shim column with what
// each problem looks like.
func testColumns() []*column {
	curve := func(rss, fds int) []point {
		var p []point
		for i := range 30 {
			p = append(p, point{time.Duration(i) * time.Second, usage{rss << 10, fds}})
		}
		return p
	}
	k := &column{name: "kernel TCP", procs: 9, clients: report{Conns: 40, Completed: 40, BytesOut: 1e9, BytesIn: 1e9},
		start: usage{2 << 10, 6}, end: usage{2 << 10, 6}, most: usage{30 << 10, 14}, curve: curve(10, 12)}
	s := &column{name: "sdpshim", shim: true, procs: 8, clients: report{Conns: 38, Completed: 35, Mismatches: 1, Hangs: 1},
		server: report{Errors: 1}, procHangs: 1, fallbacks: 2, reasons: []string{"no_peer 2"},
		start: usage{12 << 10, 11}, end: usage{40 << 10, 19}, most: usage{60 << 10, 37}, curve: curve(30, 20),
		notes: []string{"client 1: soak client: connection 00000000000000ff (D, 3 rounds, 10 B out, 20 B in): byte 7 is 01, want 02"}}
	return []*column{k, s}
}

func TestTableAndProblems(t *testing.T) {
	cols := testColumns()
	if !cols[0].clean() || cols[1].clean() {
		t.Fatalf("clean: kernel %v, sdpshim %v", cols[0].clean(), cols[1].clean())
	}
	if got, want := cols[1].problems(), "1 mismatches, 2 hangs, 1 errors, 2 fallbacks"; got != want {
		t.Errorf("problems %q, want %q", got, want)
	}
	var b bytes.Buffer
	writeTable(&b, 30*time.Second, cols)
	out := b.String()
	for _, want := range []string{
		"mismatches                        0               1",
		"fallbacks                         -               2 (no_peer 2)",
		"server fds: start, end, most      6, 6, 14        11, 19, 37",
		"soak 30s: kernel TCP: 0 mismatches, 0 hangs, 0 errors in 40 connections (9 client processes); server RSS 2.0 -> 2.0 MiB, fds 6 -> 6; " +
			"sdpshim: 1 mismatches, 2 hangs, 1 errors, 2 (no_peer 2) fallbacks in 38 connections (8 client processes); server RSS 12.0 -> 40.0 MiB, fds 11 -> 19",
		"note: sdpshim: client 1: soak client: connection 00000000000000ff",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestRecord(t *testing.T) {
	rec := results.NewRecorder("soak")
	record(rec, 30*time.Second, testColumns())
	figs := map[string]results.Figure{}
	curves := 0
	for _, f := range rec.Figures() {
		figs[f.Name] = f
		if f.Group != "" {
			curves++
		}
	}
	if f := figs["mismatches"]; f.Kernel == nil || f.Kernel.Median != 0 || f.Shim == nil || f.Shim.Median != 1 {
		t.Errorf("mismatches: %+v", f)
	}
	if f := figs["server fds at the end"]; f.Kernel.Median != 6 || f.Shim.Median != 19 {
		t.Errorf("fds at the end: %+v", f)
	}
	if f := figs["fallbacks"]; f.Kernel != nil || f.Shim.Median != 2 {
		t.Errorf("fallbacks: %+v", f)
	}
	for name, met := range map[string]bool{
		"target: no mismatch, hang, error or fallback under sdpshim":                                    false,
		"target: server fds at the end within 4 of the start":                                           false,
		"target: server RSS at the end within 1.5x kernel TCP's":                                        false,
		"target: server RSS flat after warm-up: at the end at most 1.1x its value a tenth into the run": false,
	} {
		if f, ok := figs[name]; !ok || f.Target == nil || f.Target.Met != met {
			t.Errorf("%s: %+v", name, f)
		}
	}
	if curves != 2*2*len(rows(30)) {
		t.Errorf("%d curve figures, want %d", curves, 2*2*len(rows(30)))
	}
}

func TestEnviron(t *testing.T) {
	h := &harness{lib: "/lib/libsdpshim.so"}
	cfg := []string{"PATH=/bin", "LD_PRELOAD=/x.so", "SDPSHIM_RUNDIR=/r", "SDPSHIM_POLL=event", "SDPSHIM_BENCH_VERBOSE=1"}
	h.split(cfg)
	if got := strings.Join(h.environ(false, ""), " "); got != "PATH=/bin" {
		t.Errorf("kernel TCP's environment: %s", got)
	}
	if got := strings.Join(h.environ(true, "/rd"), " "); got != "PATH=/bin SDPSHIM_POLL=event SDPSHIM_SHORT_CONN=0 SDPSHIM_LOG_LEVEL=warn LD_PRELOAD=/lib/libsdpshim.so SDPSHIM_RUNDIR=/rd" {
		t.Errorf("sdpshim's environment: %s", got)
	}
}

// The program's checks, over kernel TCP: a clean exchange; a server
// that never answers (hangs); one that answers with wrong bytes
// (mismatches).
func TestProgramDetects(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	prog, err := build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client := func(port, conns int) report {
		t.Helper()
		c := clientRun{prog: prog, environ: []string{}, port: port, seed: 7, seconds: 30, conns: conns, parallel: 3,
			stall: time.Second, exitLimit: 30 * time.Second}
		r, stderr, err := c.run()
		if err != nil {
			t.Fatalf("client: %v\n%s", err, stderr)
		}
		return r
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv, err := startServer(prog, []string{}, port, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	c := client(port, 12)
	s, err := srv.finish()
	if err != nil {
		t.Fatal(err)
	}
	if c.Conns != 12 || c.Completed != 12 || s.Conns != 12 || s.Completed != 12 || s.BytesIn != c.BytesOut || c.BytesIn != s.BytesOut {
		t.Errorf("a clean run: client %+v, server %+v", c, s)
	}

	fake := func(answer func(net.Conn)) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					io.ReadFull(conn, make([]byte, 16))
					answer(conn)
				}()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	silent := fake(func(c net.Conn) { time.Sleep(10 * time.Second) })
	if r := client(silent, 3); r.Hangs != 3 || r.Completed != 0 || r.Mismatches+r.Errors != 0 {
		t.Errorf("a silent server: %+v, want 3 hangs and nothing else", r)
	}
	wrong := fake(func(c net.Conn) {
		c.Write(bytes.Repeat([]byte{0xaa}, 64))
		io.Copy(io.Discard, c)
	})
	if r := client(wrong, 3); r.Mismatches != 3 || r.Completed != 0 {
		t.Errorf("a server of wrong bytes: %+v, want 3 mismatches", r)
	}
}
