package seed003

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/bench/internal/freeport"
)

func TestParseReport(t *testing.T) {
	for _, c := range []struct {
		out     string
		tenants []string
		ok      bool
	}{
		{`{"seconds":1.8,"tenants":[{"type":"D","conns":1,"bytes":160,"msgs":10,"p50_us":2,"p99_us":9}]}`, []string{"D"}, true},
		// A starved bulk tenant is a share of 0%, not a failure.
		{`{"seconds":1.8,"tenants":[{"type":"B","conns":1,"bytes":0,"msgs":0},{"type":"B","conns":16,"bytes":9,"msgs":1}]}`, []string{"B", "B:16"}, true},
		{`{"seconds":1.8,"tenants":[{"type":"M","conns":1,"bytes":0,"msgs":0}]}`, []string{"M"}, false},
		{`{"seconds":1.8,"tenants":[{"type":"D","conns":1,"bytes":16,"msgs":1}]}`, []string{"D", "B"}, false},
		{`{"seconds":1.8,"tenants":[{"type":"M","conns":1,"bytes":16,"msgs":1}]}`, []string{"D"}, false},
		{`{"seconds":0,"tenants":[]}`, nil, false},
		{`tenants: bad tenant X`, []string{"X"}, false},
	} {
		if _, err := parseReport(c.out, c.tenants); (err == nil) != c.ok {
			t.Errorf("parseReport(%s, %q): %v, want ok %v", c.out, c.tenants, err, c.ok)
		}
	}
}

func TestConns(t *testing.T) {
	for _, w := range workloads {
		want := map[string]int{"d": 1, "db": 2, "b": 1, "m": 1, "mb": 2, "dbp": 2, "mbp": 2, "share": 17, "streams": 17}[w.key]
		if got := w.conns(); got != want {
			t.Errorf("%s: %d connections, want %d", w.key, got, want)
		}
	}
}

// Each workload's figures from its report, and the ratios derived from
// them across workloads and modes.
func TestFiguresAndRatios(t *testing.T) {
	byKey := map[string]workload{}
	for _, w := range workloads {
		byKey[w.key] = w
	}
	rep := func(tenants ...tenant) report { return report{Seconds: 2, Tenants: tenants} }
	one := func(off bool) sample {
		s := sample{}
		bulk := 4e9
		if off {
			bulk = 5e9
		}
		for _, f := range []sample{
			byKey["d"].figures(rep(tenant{Type: "D", Msgs: 100, P50: 2, P99: 10})),
			byKey["db"].figures(rep(tenant{Type: "D", Msgs: 100, P50: 3, P99: 30}, tenant{Type: "B", Bytes: bulk})),
			byKey["b"].figures(rep(tenant{Type: "B", Bytes: 2 * bulk})),
			byKey["m"].figures(rep(tenant{Type: "M", Msgs: 4e6})),
			byKey["mb"].figures(rep(tenant{Type: "M", Msgs: 3e6}, tenant{Type: "B", Bytes: bulk})),
			byKey["dbp"].figures(rep(tenant{Type: "D", Msgs: 100, P50: 2, P99: 15}, tenant{Type: "B", Bytes: bulk})),
			byKey["mbp"].figures(rep(tenant{Type: "M", Msgs: 3.6e6}, tenant{Type: "B", Bytes: bulk})),
			byKey["share"].figures(rep(tenant{Type: "B", Bytes: 1e9}, tenant{Type: "B", Bytes: 3e9})),
		} {
			for k, v := range f {
				s[k] = v
			}
		}
		return s
	}
	run := []sample{kernel: one(false), shared: one(false), sharedOff: one(true), direct: nil, directOff: one(true)}
	derive(run)
	for k, want := range map[string]float64{
		"d.p99": 10, "db.p99": 30, "db.p99x": 3, "db.bulk": 2, "b.bulk": 4,
		"m.rate": 2, "mb.rate": 1.5, "mb.ratex": 0.75,
		"dbp.p99": 15, "dbp.p99x": 1.5, "dbp.bulk": 2, "mbp.rate": 1.8, "mbp.ratex": 0.9,
		"share.one": 25, "share.total": 2,
		"db.bulk.onoff": 0.8, "b.bulk.onoff": 0.8,
	} {
		if got, ok := run[shared][k]; !ok || got != want {
			t.Errorf("shared %s = %v (%v), want %v", k, got, ok, want)
		}
	}
	if _, ok := run[kernel]["b.bulk.onoff"]; ok {
		t.Error("kernel TCP has a PREEMPT on/off ratio")
	}
}

// The table: medians over repeats, "-" where a row has no figure,
// "failed" where a mode measured none, each judged mode's verdict.
func TestWriteTable(t *testing.T) {
	runs := [][]sample{
		{kernel: {"db.p99x": 1.1, "share.one": 6}, shared: {"db.p99x": 1.5, "share.one": 50, "b.bulk.onoff": 0.9}, sharedOff: {"db.p99x": 9}, direct: {"db.p99x": 3}, directOff: {"db.p99x": 30}},
		{kernel: {"db.p99x": 1.0, "share.one": 5}, shared: {"db.p99x": 1.9, "share.one": 30, "b.bulk.onoff": 1.0}, sharedOff: {"db.p99x": 8}, direct: {"db.p99x": 5}, directOff: {"db.p99x": 40}},
		{kernel: {"db.p99x": 1.2, "share.one": 7}, shared: {"db.p99x": 2.5, "share.one": 45, "b.bulk.onoff": 0.96}, sharedOff: {"db.p99x": 7}, direct: {"db.p99x": 4}, directOff: {"db.p99x": 50}},
	}
	var b strings.Builder
	writeTable(&b, runs)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"p99 beside B_App / alone x 1.10x 1.90x 8.00x 4.00x 40.00x <= 2x shared yes, direct NO",
		"PREEMPT on / off x - 0.96x - failed - >= 0.95x shared yes",
		"1-stream tenant's share beside a 16-stream tenant % 6.0 45.0 failed failed failed >= 40% shared yes",
		"client pauses/s, B_App alone /s - failed failed failed failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The program builds and runs over kernel TCP, its tenants in one
// process or each in its own, and its report parses.
func TestTenantsKernel(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	prog, err := Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startServer(prog, nil, port)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	if ns, err := lineNS(prog, nil); err != nil || ns <= 0 {
		t.Errorf("tenants line: %v ns, %v", ns, err)
	}
	for _, w := range []workload{{"mb", []string{"M", "B"}, false}, {"share", []string{"B", "B:2"}, true}} {
		out, snaps, err := runClient(prog, nil, "", port, 0.3, w)
		if err != nil {
			t.Fatal(err)
		}
		if snaps != nil {
			t.Error("stats of a client without the shim")
		}
		rep, err := parseReport(out, w.tenants)
		if err != nil {
			t.Fatal(err)
		}
		f := w.figures(rep)
		if w.key == "mb" && (f["mb.rate"] <= 0 || f["mb.bulk"] <= 0) || w.key == "share" && (f["share.one"] <= 0 || f["share.total"] <= 0) {
			t.Errorf("%s: figures %v from %s", w.key, f, out)
		}
	}
}
