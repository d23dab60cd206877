package seed003

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/cbuild"
	"github.com/sdpshim/sdpshim/bench/programs"
	"github.com/sdpshim/sdpshim/shim/stats"
)

//go:embed csrc/tenants.c
var tenantsC []byte

// Build compiles tenants.c in dir and returns the program. The source
// goes where it lies in the repository, the header it includes by path
// beside it (programs.SockIO).
func Build(dir string) (string, error) {
	const src = "bench/seed003/csrc/tenants.c"
	return cbuild.Build(dir, src, map[string][]byte{
		src:                            tenantsC,
		"bench/programs/csrc/sockio.h": programs.SockIO, // as its #include finds it
	}, "-pthread")
}

// report is what one tenants client prints: per tenant, in the order
// given, what it moved in the measured seconds.
type report struct {
	Seconds float64  `json:"seconds"`
	Tenants []tenant `json:"tenants"`
}

type tenant struct {
	Type  string  `json:"type"`
	Conns int     `json:"conns"`
	Bytes float64 `json:"bytes"`
	Msgs  float64 `json:"msgs"`
	P50   float64 `json:"p50_us"` // D only
	P99   float64 `json:"p99_us"` // D only
}

// parseReport decodes a client's output and checks that it has the
// tenants asked for, in order, and a measured time.
func parseReport(out string, tenants []string) (report, error) {
	var r report
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		return r, fmt.Errorf("tenants client: %v in %q", err, out)
	}
	if r.Seconds <= 0 || len(r.Tenants) != len(tenants) {
		return r, fmt.Errorf("tenants client: %d tenants over %g s, want %d: %q", len(r.Tenants), r.Seconds, len(tenants), out)
	}
	for i, t := range r.Tenants {
		if t.Type != tenants[i][:1] {
			return r, fmt.Errorf("tenants client: tenant %d is %s, want %s: %q", i, t.Type, tenants[i], out)
		}
		// A starved bulk tenant is a figure (its share); a D or M
		// tenant without messages has no latency or rate to give.
		if t.Type != "B" && t.Msgs == 0 {
			return r, fmt.Errorf("tenants client: tenant %d (%s) moved nothing: %q", i, tenants[i], out)
		}
	}
	return r, nil
}

// server is a tenants server running in its own process group.
type server struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

// startServer starts `tenants server port` with environ and waits until
// it listens (read from /proc/net/tcp: a probing connection would count
// as a tenant).
func startServer(prog string, environ []string, port int) (*server, error) {
	s := &server{cmd: exec.Command(prog, "server", fmt.Sprint(port)), done: make(chan error, 1)}
	s.cmd.Env = environ
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if listens(port) {
			return s, nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			s.stop()
			return nil, fmt.Errorf("tenants server ended: %v: %s", err, s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.stop()
	return nil, fmt.Errorf("tenants server: nothing listens on port %d", port)
}

// stop kills the server's process group and waits for the server.
func (s *server) stop() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
	}
}

// listens says whether a TCP socket listens on 127.0.0.1:port.
func listens(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	b, _ := os.ReadFile("/proc/net/tcp")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// runClient runs w's tenants client (`tenants client`, or `tenants
// clients` for a workload of a process per tenant) on port for secs with
// environ to its end. With a run directory rd (a shimmed run) it also
// reads the stats of the client's processes (the client, or the
// tenants' processes it forked) shortly before the end (snaps, those
// that could be read): their counters vanish with them.
func runClient(prog string, environ []string, rd string, port int, secs float64, w workload) (out string, snaps []*stats.Snapshot, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs*float64(time.Second))+30*time.Second)
	defer cancel()
	cmd := "client"
	if w.procs {
		cmd = "clients"
	}
	args := append([]string{cmd, fmt.Sprint(port), fmt.Sprint(secs)}, w.tenants...)
	c := exec.CommandContext(ctx, prog, args...)
	c.Env = environ
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		return "", nil, err
	}
	got := make(chan []*stats.Snapshot, 1)
	go func() {
		if rd == "" {
			got <- nil
			return
		}
		time.Sleep(time.Duration(0.9 * secs * float64(time.Second)))
		got <- snapshotsOf(rd, c.Process.Pid, w.procs)
	}()
	err = c.Wait()
	snaps = <-got
	if err != nil {
		return "", nil, fmt.Errorf("tenants %s %s: %v: %s", cmd, strings.Join(w.tenants, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), snaps, nil
}

// snapshotsOf reads the stats of process pid in run directory rd, or with
// children those of its child processes; those that cannot be read are
// left out.
func snapshotsOf(rd string, pid int, children bool) []*stats.Snapshot {
	var eps []stats.Endpoint
	if children {
		eps = Children(rd, pid)
	} else if all, err := stats.List(rd); err == nil {
		for _, ep := range all {
			if ep.PID == pid {
				eps = append(eps, ep)
			}
		}
	}
	var out []*stats.Snapshot
	for _, ep := range eps {
		if s, err := stats.Fetch(ep.Path, 2*time.Second); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the stats endpoints in run directory rd of the child
// processes of pid (`tenants clients`' tenants; their parent from /proc).
func Children(rd string, pid int) []stats.Endpoint {
	eps, err := stats.List(rd)
	if err != nil {
		return nil
	}
	var out []stats.Endpoint
	for _, ep := range eps {
		if parentOf(ep.PID) == pid {
			out = append(out, ep)
		}
	}
	return out
}

// parentOf returns the parent pid of pid (from /proc), or -1.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return -1
	}
	var ppid int
	fmt.Sscan(f[1], &ppid)
	return ppid
}

// snapshotOf reads the stats of process pid in run directory rd; nil
// when it cannot.
func snapshotOf(rd string, pid int) *stats.Snapshot {
	if s := snapshotsOf(rd, pid, false); len(s) > 0 {
		return s[0]
	}
	return nil
}

// lineNS runs `tenants line` (without the shim): the machine's cache-line
// round trip now, in ns.
func lineNS(prog string, environ []string) (float64, error) {
	c := exec.Command(prog, "line")
	c.Env = environ
	out, err := c.Output()
	if err != nil {
		return 0, fmt.Errorf("tenants line: %v", err)
	}
	var r struct {
		LineNS float64 `json:"line_ns"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil || r.LineNS <= 0 {
		return 0, fmt.Errorf("tenants line: %q: %v", out, err)
	}
	return r.LineNS, nil
}
