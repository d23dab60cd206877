package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// The stats socket and `sdpshim stats` against real shimmed programs (the
// demo programs): an accelerated pair, a mixed pair, a client of another
// uid, the Prometheus text.

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// sdpshimCLI returns the sdpshim executable: SDPSHIM_BUILD's, or one built
// beside the test's libraries (trace finds the core library beside it).
func sdpshimCLI(t *testing.T) string {
	t.Helper()
	a := build(t)
	cliOnce.Do(func() {
		if b := os.Getenv("SDPSHIM_BUILD"); b != "" {
			cliPath = filepath.Join(b, "sdpshim")
			_, cliErr = os.Stat(cliPath)
			return
		}
		cliPath = filepath.Join(filepath.Dir(a.lib), "sdpshim")
		out, err := exec.Command("go", "build", "-trimpath", "-o", cliPath, "../cmd/sdpshim").CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("go build ./cmd/sdpshim: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// statsJSON runs `sdpshim stats --json --rundir rd PID` and decodes it.
func statsJSON(t *testing.T, rd string, pid int) (*stats.Snapshot, error) {
	t.Helper()
	cmd := exec.Command(sdpshimCLI(t), "stats", "--json", "--rundir", rd, fmt.Sprint(pid))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sdpshim stats: %v: %s", err, stderr.String())
	}
	var s stats.Snapshot
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("decode %q: %v", out, err)
	}
	return &s, nil
}

// waitSnapshot polls PID's stats until ok accepts a snapshot (5 s).
func waitSnapshot(t *testing.T, rd string, pid int, what string, ok func(*stats.Snapshot) bool) *stats.Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last *stats.Snapshot
	var lastErr error
	for time.Now().Before(deadline) {
		s, err := statsJSON(t, rd, pid)
		if err == nil && ok(s) {
			return s
		}
		last, lastErr = s, err
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := json.MarshalIndent(last, "", "  ")
	t.Fatalf("pid %d: no snapshot with %s after 5 s (last error %v):\n%s", pid, what, lastErr, b)
	return nil
}

// acceleratedConn returns the snapshot's open shm connection, or nil.
func acceleratedConn(s *stats.Snapshot) *stats.ConnStats {
	for i := range s.Connections {
		if s.Connections[i].Transport == "shm" {
			return &s.Connections[i]
		}
	}
	return nil
}

// An accelerated pair: both processes list the shm connection, the
// receiver's byte count grows between two reads, the channel and the flow
// controller are there; --prom parses with Prometheus's own parser.
func TestStatsAcceleratedConnection(t *testing.T) {
	a := build(t)
	sdpshimCLI(t) // built before the programs start
	rd := runDir(t)
	// The shared channel: its blocks and flow controller are reported too.
	env := append(a.environ(t, side{shim: true}, rd), "SDPSHIM_CHANNEL=shared")
	srv := start(t, env, 20*time.Second, a.stream, "server", "-a", "127.0.0.1", "-p", "0")
	port := srv.listening(t)
	cli := start(t, env, 20*time.Second, a.stream,
		"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s", "4096", "-t", "3")

	srvPID, cliPID := srv.cmd.Process.Pid, cli.cmd.Process.Pid
	first := waitSnapshot(t, rd, srvPID, "an accelerated connection that received bytes", func(s *stats.Snapshot) bool {
		c := acceleratedConn(s)
		return c != nil && c.BytesReceived > 0
	})
	c1 := acceleratedConn(first)
	second := waitSnapshot(t, rd, srvPID, "more bytes received", func(s *stats.Snapshot) bool {
		c := acceleratedConn(s)
		return c != nil && c.ID == c1.ID && c.BytesReceived > c1.BytesReceived && c.MessagesReceived > c1.MessagesReceived
	})
	c2 := acceleratedConn(second)
	t.Logf("server connection %d: %d then %d bytes received", c2.ID, c1.BytesReceived, c2.BytesReceived)
	switch {
	case c2.PeerPID != cliPID:
		t.Errorf("peer_pid %d, want the client %d", c2.PeerPID, cliPID)
	case c2.Cookie == 0:
		t.Error("no socket cookie")
	case c2.Flow == "" || c2.FlowStats == nil || c2.FlowStats.BytesConsumed == 0:
		t.Errorf("flow controller %q, stats %+v: want its counters", c2.Flow, c2.FlowStats)
	case c2.Channel == 0 || len(second.Channels) == 0 || second.Channels[0].BlocksReceived == 0:
		t.Errorf("channel %d, channels %+v: want the connection's channel with blocks received", c2.Channel, second.Channels)
	case second.Totals.Accelerated != 1 || second.Totals.ConnsOpen != 1 || second.Totals.Fallbacks != 0:
		t.Errorf("totals %+v: want one accelerated connection, no fallback", second.Totals)
	case !strings.HasSuffix(c2.Local, fmt.Sprintf(":%d", port)):
		t.Errorf("local address %q, want port %d", c2.Local, port)
	}

	cs := waitSnapshot(t, rd, cliPID, "an accelerated connection that sent bytes", func(s *stats.Snapshot) bool {
		c := acceleratedConn(s)
		return c != nil && c.BytesSent > 0
	})
	if c := acceleratedConn(cs); c.PeerPID != srvPID || c.Peer != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("client connection: peer %s pid %d, want 127.0.0.1:%d pid %d", c.Peer, c.PeerPID, port, srvPID)
	}

	out, err := exec.Command(sdpshimCLI(t), "stats", "--prom", "--rundir", rd).Output()
	if err != nil {
		t.Fatalf("sdpshim stats --prom: %v", err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("Prometheus text parser: %v\n%s", err, out)
	}
	for _, name := range []string{"sdpshim_bytes_total", "sdpshim_connection_bytes_total", "sdpshim_connections_accelerated_total", "sdpshim_channel_blocks_in_use", "sdpshim_waiter_budget"} {
		if fams[name] == nil {
			t.Errorf("--prom lacks %s", name)
		}
	}
	pids := map[string]bool{}
	for _, m := range fams["sdpshim_connections_accelerated_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "pid" && m.GetCounter().GetValue() == 1 {
				pids[l.GetValue()] = true
			}
		}
	}
	if !pids[fmt.Sprint(srvPID)] || !pids[fmt.Sprint(cliPID)] {
		t.Errorf("--prom: accelerated connections for pids %v, want %d and %d", pids, srvPID, cliPID)
	}
	if err := cli.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.errb.String())
	}
}

// A direct connection (the default channel): the waits the interposer
// makes on its handle are listed as the connection's ".direct" waiter,
// with what its polls ended and what slept.
func TestStatsDirectWaits(t *testing.T) {
	a := build(t)
	sdpshimCLI(t)
	rd := runDir(t)
	env := a.environ(t, side{shim: true}, rd)
	srv := start(t, env, 20*time.Second, a.stream, "server", "-a", "127.0.0.1", "-p", "0")
	port := srv.listening(t)
	cli := start(t, env, 20*time.Second, a.stream,
		"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s", "4096", "-t", "3")
	var direct *stats.WaiterSnapshot
	s := waitSnapshot(t, rd, srv.cmd.Process.Pid, "a direct connection whose handle waited", func(s *stats.Snapshot) bool {
		c := acceleratedConn(s)
		if c == nil || c.Flow != "direct" {
			return false
		}
		for i, w := range s.Waiters {
			if w.Name == fmt.Sprintf("conn%d.direct", c.ID) && w.Waits > 0 {
				direct = &s.Waiters[i]
				return true
			}
		}
		return false
	})
	t.Logf("server's handle: %+v", *direct)
	if direct.PollHits+direct.Sleeps != direct.Waits || s.Totals.Accelerated != 1 {
		t.Errorf("waiter %+v, totals %+v: want hits and sleeps adding up to the waits, one accelerated connection", *direct, s.Totals)
	}
	if err := cli.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.errb.String())
	}
}

// A mixed pair: the shimmed client of a plain server shows the fallback,
// its reason and the peer.
func TestStatsMixedPairFallback(t *testing.T) {
	a := build(t)
	sdpshimCLI(t) // built before the programs start
	rd := runDir(t)
	srv := start(t, a.environ(t, side{}, rd), 20*time.Second, a.pingpong, "server", "-a", "127.0.0.1", "-p", "0")
	port := srv.listening(t)
	cli := start(t, a.environ(t, side{shim: true}, rd), 20*time.Second, a.pingpong,
		"client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-t", "2")
	s := waitSnapshot(t, rd, cli.cmd.Process.Pid, "a peer-not-shimmed fallback", func(s *stats.Snapshot) bool {
		return len(s.Fallbacks) > 0
	})
	want := stats.ReasonCount{Code: 1, Name: "peer-not-shimmed", Count: 1}
	if len(s.Fallbacks) != 1 || s.Fallbacks[0] != want {
		t.Errorf("fallbacks %+v, want [%+v]", s.Fallbacks, want)
	}
	peer := fmt.Sprintf("127.0.0.1:%d", port)
	if n := len(s.RecentFallbacks); n != 1 || s.RecentFallbacks[0].Peer != peer || s.RecentFallbacks[0].Name != "peer-not-shimmed" || s.RecentFallbacks[0].Cookie == 0 {
		t.Errorf("recent fallbacks %+v, want one to %s with a cookie", s.RecentFallbacks, peer)
	}
	if s.Totals.Fallbacks != 1 || s.Totals.Accelerated != 0 || acceleratedConn(s) != nil {
		t.Errorf("totals %+v, connections %+v: want one fallback, nothing accelerated", s.Totals, s.Connections)
	}
	out, err := exec.Command(sdpshimCLI(t), "stats", "--rundir", rd, fmt.Sprint(cli.cmd.Process.Pid)).Output()
	if err != nil || !strings.Contains(string(out), "peer-not-shimmed") {
		t.Errorf("sdpshim stats PID (%v) does not name the reason:\n%s", err, out)
	}
	if err := cli.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, cli.errb.String())
	}
}

// A client of another uid is refused: without privilege it cannot reach
// the socket (the run directory is 0700); with CAP_DAC_OVERRIDE it
// connects, and SO_PEERCRED refuses it (counted by the server). Root is
// served.
func TestStatsOtherUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another uid (CI runs as root)")
	}
	a := build(t)
	sdpshimCLI(t)
	rd := runDir(t)
	srv := start(t, a.environ(t, side{shim: true}, rd), 20*time.Second, a.pingpong, "server", "-a", "127.0.0.1", "-p", "0")
	srv.listening(t)
	pid := srv.cmd.Process.Pid
	waitSnapshot(t, rd, pid, "a snapshot for root", func(*stats.Snapshot) bool { return true })

	// The CLI must be executable by nobody: a copy in a directory it can
	// reach.
	dir, err := os.MkdirTemp("", "sdpshim-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "sdpshim")
	b, err := os.ReadFile(sdpshimCLI(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	asNobody := func(caps ...uintptr) (string, error) {
		cmd := exec.Command(exe, "stats", "--json", "--rundir", rd, fmt.Sprint(pid))
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, AmbientCaps: caps}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := asNobody()
	if err == nil || strings.Contains(out, `"version"`) {
		t.Errorf("uid %d read the stats without privilege (%v):\n%s", nobody, err, out)
	}
	const capDACOverride = 1
	out, err = asNobody(capDACOverride)
	if err == nil || strings.Contains(out, `"version"`) || !strings.Contains(out, "not allowed") {
		t.Errorf("uid %d with CAP_DAC_OVERRIDE: want the server to refuse it (SO_PEERCRED), got %v:\n%s", nobody, err, out)
	}
	s := waitSnapshot(t, rd, pid, "a refused client counted", func(s *stats.Snapshot) bool { return s.Server.Refused >= 1 })
	t.Logf("server counters: %+v", s.Server)
}

// A fallback the interposer decides itself while the core runs (a socket
// made in a vfork child: vfork-child, 72) is counted in the interposer's
// table and shown by the core's stats.
func TestStatsInterposerFallbackCounted(t *testing.T) {
	a := build(t)
	sdpshimCLI(t)
	exe := cbuild(t, "testdata/vforksock.c")
	rd := runDir(t)
	p := start(t, a.environ(t, side{shim: true}, rd), 20*time.Second, exe)
	s := waitSnapshot(t, rd, p.cmd.Process.Pid, "the vfork child's fallback", func(s *stats.Snapshot) bool {
		return len(s.Fallbacks) > 0
	})
	want := stats.ReasonCount{Code: 72, Name: "vfork-child", Count: 1}
	if len(s.Fallbacks) != 1 || s.Fallbacks[0] != want || s.Totals.Fallbacks != 1 {
		t.Errorf("fallbacks %+v (total %d), want [%+v]", s.Fallbacks, s.Totals.Fallbacks, want)
	}
}
