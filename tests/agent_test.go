package tests

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// `sdpshim agent` against real shimmed programs: it prepares the run
// directory, answers /healthz, and its /metrics (parsed by Prometheus's
// own text parser) counts the accelerated connection of both ends, with
// the pod UID of a process placed in a cgroup named as the kubelet names
// a pod's; where it runs the eBPF trace, the trace saw both ends'
// acceleration.
func TestAgentMetrics(t *testing.T) {
	a := build(t)
	cli := sdpshimCLI(t)
	rd := runDir(t)
	args := []string{"agent", "--rundir", rd, "--listen", "127.0.0.1:0", "--sweep", "1h"}
	wantMode := os.FileMode(0o700) | os.ModeDir
	if os.Geteuid() == 0 {
		args = append(args, "--group", "4242")
		wantMode = 0o770 | os.ModeDir | os.ModeSetgid | os.ModeSticky
	}
	base := startAgent(t, cli, args...)
	if fi, err := os.Stat(rd); err != nil || fi.Mode() != wantMode {
		t.Fatalf("run directory: %v (%v), want %v", fi.Mode(), err, wantMode)
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}

	env := a.environ(t, side{shim: true}, rd)
	srv := start(t, env, 20*time.Second, a.stream, "server", "-a", "127.0.0.1", "-p", "0")
	srvPID := srv.cmd.Process.Pid
	podUID := placeInPod(t, srvPID)
	port := srv.listening(t)
	client := start(t, env, 20*time.Second, a.stream, "client", "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-s", "4096", "-t", "3")
	cliPID := client.cmd.Process.Pid

	// The agent reads the processes at each scrape: scrape until both
	// ends report their connection accelerated and bytes moved.
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = scrape(t, base)
		srvBytes := value(fams, "sdpshim_bytes_total", "pid", fmt.Sprint(srvPID), "direction", "received")
		if value(fams, "sdpshim_connections_accelerated_total", "pid", fmt.Sprint(srvPID)) == 1 &&
			value(fams, "sdpshim_connections_accelerated_total", "pid", fmt.Sprint(cliPID)) == 1 && srvBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no accelerated connection of pids %d and %d with bytes in /metrics after 10 s:\n%v", srvPID, cliPID, fams["sdpshim_connections_accelerated_total"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range []int{srvPID, cliPID} {
		if v := value(fams, "sdpshim_connections_open_by_transport", "pid", fmt.Sprint(pid), "transport", "shm"); v != 1 {
			t.Errorf("pid %d: %v open shm connections, want 1", pid, v)
		}
		if v := value(fams, "sdpshim_fallbacks_total", "pid", fmt.Sprint(pid)); v != 0 {
			t.Errorf("pid %d: %v fallbacks, want none", pid, v)
		}
	}
	if v := value(fams, "sdpshim_agent_processes"); v != 2 {
		t.Errorf("sdpshim_agent_processes %v, want 2", v)
	}
	if v := value(fams, "sdpshim_agent_process_read_errors"); v != 0 {
		t.Errorf("sdpshim_agent_process_read_errors %v", v)
	}
	if podUID != "" {
		if got := label(fams, "sdpshim_connections_accelerated_total", "pid", fmt.Sprint(srvPID), "pod_uid"); got != podUID {
			t.Errorf("server in pod %s: pod_uid %q", podUID, got)
		} else {
			t.Logf("server labelled pod_uid=%s", got)
		}
	}
	if got := label(fams, "sdpshim_connections_accelerated_total", "pid", fmt.Sprint(cliPID), "pod_uid"); got != "" {
		t.Errorf("client outside any pod: pod_uid %q", got)
	}

	// The trace: running (root), it saw both ends accelerated; else it
	// says why.
	up := fams["sdpshim_agent_trace_up"]
	if up == nil || len(up.GetMetric()) != 1 {
		t.Fatalf("sdpshim_agent_trace_up: %v", up)
	}
	if reason := labelOf(up.GetMetric()[0], "reason"); up.GetMetric()[0].GetGauge().GetValue() == 1 {
		for value(fams, "sdpshim_trace_accelerated_events_total", "transport", "shm") < 2 {
			if time.Now().After(deadline.Add(10 * time.Second)) {
				t.Fatalf("the trace runs but counted %v shm accelerations, want 2 or more", value(fams, "sdpshim_trace_accelerated_events_total"))
			}
			time.Sleep(100 * time.Millisecond)
			fams = scrape(t, base)
		}
		t.Logf("the trace counted %v shm accelerations", value(fams, "sdpshim_trace_accelerated_events_total", "transport", "shm"))
	} else if reason == "" {
		t.Error("the trace is not running and says no reason")
	} else {
		t.Logf("the agent runs without the trace: %s", reason)
	}
	if err := client.wait(); err != nil {
		t.Fatalf("client: %v\n%s", err, client.errb.String())
	}
}

// startAgent starts `sdpshim args...`, waits for the address it serves
// and returns its base URL. At cleanup it stops it with SIGTERM and fails
// t unless it exited 0.
func startAgent(t *testing.T, cli string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, cli, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		re := regexp.MustCompile(`address="([^"]+)"`)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			log.WriteString(s.Text() + "\n")
			if m := re.FindStringSubmatch(s.Text()); m != nil {
				addr <- m[1]
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		defer cancel()
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Errorf("agent: %v\n%s", err, log.String())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-done:
		done <- err
		t.Fatalf("agent ended before serving: %v\n%s", err, log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("agent serves nothing after 20 s:\n%s", log.String())
	}
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads base's /metrics and parses it with Prometheus's text parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus text parser: %v\n%s", err, body)
	}
	return fams
}

// value sums the samples of family name whose labels match the pairs.
func value(fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		if matches(m, pairs) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum
}

// label returns label key of the first sample of name matching pairs.
func label(fams map[string]*dto.MetricFamily, name string, pairs ...string) string {
	key := pairs[len(pairs)-1]
	for _, m := range fams[name].GetMetric() {
		if matches(m, pairs[:len(pairs)-1]) {
			return labelOf(m, key)
		}
	}
	return "(no sample)"
}

func matches(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if labelOf(m, pairs[i]) != pairs[i+1] {
			return false
		}
	}
	return true
}

func labelOf(m *dto.Metric, key string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == key {
			return l.GetValue()
		}
	}
	return ""
}

// placeInPod moves process pid into a cgroup v2 directory named as the
// kubelet names a pod's (kubepods/burstable/pod<uid>, under a directory
// of this test) and returns the UID; "" when this machine offers no
// writable cgroup v2 hierarchy (not root, or none mounted), logged.
func placeInPod(t *testing.T, pid int) string {
	t.Helper()
	mnt := cgroup2Mount()
	if mnt == "" || os.Geteuid() != 0 {
		t.Logf("no pod label checked: needs root and a cgroup v2 hierarchy (mount %q)", mnt)
		return ""
	}
	var b [16]byte
	rand.Read(b[:])
	uid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	top := filepath.Join(mnt, fmt.Sprintf("sdpshim-test-%d", os.Getpid()))
	dir := filepath.Join(top, "kubepods", "burstable", "pod"+uid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("no pod label checked: %v", err)
		return ""
	}
	t.Cleanup(func() {
		// Back to this test's own cgroup, then the directories go. A
		// process that is exiting leaves its cgroup a moment later
		// (rmdir says EBUSY until then): members are moved out again
		// and the removal retried, for 10 s at most.
		own := filepath.Join(mnt, ownCgroup2(), "cgroup.procs")
		os.WriteFile(own, []byte(strconv.Itoa(pid)), 0)
		for d := dir; d != filepath.Dir(top); d = filepath.Dir(d) {
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if err = os.Remove(d); err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
					break
				}
				if b, rerr := os.ReadFile(filepath.Join(d, "cgroup.procs")); rerr == nil {
					for _, p := range strings.Fields(string(b)) {
						os.WriteFile(own, []byte(p), 0)
					}
				}
			}
			if err != nil {
				t.Errorf("remove cgroup: %v", err)
			}
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("move %d into %s: %v", pid, dir, err)
	}
	return uid
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted, "" if
// nowhere.
func cgroup2Mount() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 {
			return f[4]
		}
	}
	return ""
}

// ownCgroup2 returns this process's cgroup v2 path ("0::" line).
func ownCgroup2() string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return "/"
}
