package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// statsServer serves a registry with one accelerated connection, one
// fell-back connection and a fallback, in a fresh run directory; it
// returns the environment that points the CLI there.
func statsServer(t *testing.T) (environ []string, reg *stats.Registry, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "run")
	reg = stats.NewRegistry(stats.Options{})
	peer := netip.MustParseAddrPort("127.0.0.1:6379")
	c := reg.Open(stats.ConnInfo{FD: 7, Peer: peer, PeerPID: 4242, Cookie: 99, Transport: stats.TransportSHM, Flow: "credit"})
	c.Sent(4096)
	c.Received(100)
	fb := reg.Open(stats.ConnInfo{FD: 8, Peer: peer, Transport: stats.TransportTCPFallback, Reason: 1})
	_ = fb
	reg.Fallback(stats.FallbackInfo{Reason: 1, FD: 8, Peer: peer})
	reg.AddChannel(stats.ChannelInfo{ID: 1, PeerPID: 4242, Transport: "statusbyte", Blocks: 64, BlockSize: 16384},
		func() stats.ChannelStats { return stats.ChannelStats{BlocksInUse: 2, ReadSyncs: 5} })
	reg.AddWaiter("progress", func() wait.WaiterStats { return wait.WaiterStats{Waits: 3, PollHits: 2, Budget: 64} })
	stop, err := stats.Serve(dir, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return []string{"SDPSHIM_RUNDIR=" + dir}, reg, dir
}

func TestStatsTable(t *testing.T) {
	environ, _, _ := statsServer(t)
	code, stdout, stderr := runWith(environ, "stats")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one process:\n%s", stdout)
	}
	f := strings.Fields(lines[1])
	want := []string{strconv.Itoa(os.Getpid()), "", "2", "1", "1", "4.0KiB", "100B", "1", "1", "0", "0%"}
	if len(f) != len(want) {
		t.Fatalf("row %q: %d fields, want %d", lines[1], len(f), len(want))
	}
	for i, w := range want {
		if w != "" && f[i] != w {
			t.Errorf("column %s = %q, want %q", strings.Fields(lines[0])[i], f[i], w)
		}
	}
}

func TestStatsDetail(t *testing.T) {
	environ, _, _ := statsServer(t)
	code, stdout, stderr := runWith(environ, "stats", strconv.Itoa(os.Getpid()))
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"connections: 2 open, 2 opened, 1 accelerated, 1 fallbacks",
		"127.0.0.1:6379  4242      shm           -",
		"tcp-fallback  peer-not-shimmed(1)",
		"statusbyte  64x16384  2       5",
		"progress  3      2          1            0       0              64",
		"peer-not-shimmed  1     1",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestStatsJSON(t *testing.T) {
	environ, reg, _ := statsServer(t)
	code, stdout, _ := runWith(environ, "stats", "--json")
	var all []stats.Snapshot
	if err := json.Unmarshal([]byte(stdout), &all); code != exitOK || err != nil || len(all) != 1 {
		t.Fatalf("exit %d, %v, %d snapshots:\n%s", code, err, len(all), stdout)
	}
	s := all[0]
	if s.Version != stats.Version || s.Process.PID != os.Getpid() || len(s.Connections) != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	if c := s.Connections[0]; c.Transport != "shm" || c.BytesSent != 4096 || c.Cookie != 99 || c.Flow != "credit" {
		t.Errorf("accelerated connection %+v", c)
	}
	if c := s.Connections[1]; c.Transport != "tcp-fallback" || c.ReasonName != "peer-not-shimmed" {
		t.Errorf("fallback connection %+v", c)
	}
	// Counts grow between reads; one PID gives one object.
	reg.Open(stats.ConnInfo{FD: 9, Transport: stats.TransportSHM}).Sent(1)
	code, stdout, _ = runWith(environ, "stats", "--json", strconv.Itoa(os.Getpid()))
	var one stats.Snapshot
	if err := json.Unmarshal([]byte(stdout), &one); code != exitOK || err != nil || one.Totals.BytesSent != 4097 {
		t.Errorf("exit %d, %v, bytes sent %d, want 4097", code, err, one.Totals.BytesSent)
	}
}

func TestStatsProm(t *testing.T) {
	environ, _, _ := statsServer(t)
	code, stdout, _ := runWith(environ, "stats", "--prom")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkPromLines(t, stdout)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(stdout))
	if err != nil {
		t.Fatalf("Prometheus parser: %v\n%s", err, stdout)
	}
	pid := strconv.Itoa(os.Getpid())
	for name, want := range map[string]float64{
		"sdpshim_bytes_total":                   4096 + 100,
		"sdpshim_connections_open":              2,
		"sdpshim_fallbacks_total":               1,
		"sdpshim_connection_bytes_total":        4096 + 100,
		"sdpshim_channel_read_syncs_total":      5,
		"sdpshim_waiter_poll_misses_total":      1,
		"sdpshim_scheduler_preemptions_total":   0,
		"sdpshim_stats_clients_refused_total":   0,
		"sdpshim_flow_buffer_utilisation":       0,
		"sdpshim_connections_accelerated_total": 1,
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("no family %s", name)
			continue
		}
		var sum float64
		for _, m := range f.Metric {
			if labelOf(m.Label, "pid") != pid {
				t.Errorf("%s sample without pid=%s", name, pid)
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
		if sum != want {
			t.Errorf("%s sums to %v, want %v", name, sum, want)
		}
	}
	if r := fams["sdpshim_fallbacks_total"].Metric[0]; labelOf(r.Label, "reason") != "peer-not-shimmed" || labelOf(r.Label, "code") != "1" {
		t.Errorf("fallback labels %v", r.Label)
	}
}

// labelOf returns the value of label name.
func labelOf[L interface {
	GetName() string
	GetValue() string
}](labels []L, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkPromLines checks the exposition's layout beyond what the parser
// enforces: each family once, HELP then TYPE before its samples, and
// nothing but comments and samples.
func checkPromLines(t *testing.T, text string) {
	t.Helper()
	seen := map[string]bool{}
	current := ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name := strings.Fields(line)[2]
			if seen[name] {
				t.Errorf("line %d: family %s twice", i+1, name)
			}
			seen[name], current = true, name
		case strings.HasPrefix(line, "# TYPE "):
			if f := strings.Fields(line); len(f) != 4 || f[2] != current || (f[3] != "counter" && f[3] != "gauge") {
				t.Errorf("line %d: TYPE %q does not follow its HELP", i+1, line)
			}
		default:
			name, _, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			if name != current {
				t.Errorf("line %d: sample %q outside its family %s", i+1, line, current)
			}
		}
	}
}

func TestStatsStaleAndMissing(t *testing.T) {
	environ, _, dir := statsServer(t)
	// A socket file of a dead process is skipped.
	dead := deadPID(t)
	os.WriteFile(filepath.Join(dir, stats.SockName(dead)), nil, 0o600)
	if code, stdout, stderr := runWith(environ, "stats"); code != exitOK || stderr != "" || strings.Count(stdout, "\n") != 2 {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, _, stderr := runWith(environ, "stats", strconv.Itoa(dead))
	if code != exitFailure || !strings.Contains(stderr, "serves no stats") {
		t.Errorf("dead pid: exit %d, stderr %q", code, stderr)
	}
	empty := []string{"SDPSHIM_RUNDIR=" + filepath.Join(t.TempDir(), "none")}
	if code, stdout, _ := runWith(empty, "stats"); code != exitOK || !strings.Contains(stdout, "no shimmed process") {
		t.Errorf("empty run directory: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := runWith(empty, "stats", "--json"); code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("empty run directory, --json: exit %d, %q", code, stdout)
	}
	for _, args := range [][]string{{"stats", "x"}, {"stats", "1", "2"}, {"stats", "--json", "--prom"}} {
		if code, _, stderr := runWith(empty, args...); code != exitUsage || !strings.Contains(stderr, "usage: sdpshim stats") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func deadPID(t *testing.T) int {
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skip("cannot run /bin/true:", err)
	}
	p.Wait()
	return p.Pid
}

// The table lists the user's bulk senders from the tenant board of the
// run directory (an entry written now, not one a minute old) and the
// process whose small messages were late lately.
func TestStatsTenants(t *testing.T) {
	environ, _, dir := statsServer(t)
	n, err := rendezvous.New(rendezvous.Config{RunDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fd, err := n.OpenBoard()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	now := rendezvous.BoardNow()
	for i, e := range []rendezvous.TenantEntry{{PID: 5151, Demand: 16, Beat: now}, {PID: 6262, Demand: 1, Beat: now - time.Minute}} {
		if err := rendezvous.WriteEntry(fd, i, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := rendezvous.WriteStarved(fd, 7373, now); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runWith(environ, "stats")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "small messages late for the CPU in pid 7373 ") {
		t.Errorf("want the starved mark of pid 7373:\n%s", stdout)
	}
	if !strings.Contains(stdout, "bulk senders taking turns") || !regexp.MustCompile(`(?m)^\s*5151\s+16\s`).MatchString(stdout) || strings.Contains(stdout, "6262") {
		t.Errorf("want pid 5151's 16 streams and not pid 6262's old entry:\n%s", stdout)
	}
}
