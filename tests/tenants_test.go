package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/bench/seed003"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/internal/cpupin"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// TestTenantTurnsBetweenProcesses runs two client processes of one user
// under the shim against one server (bench/seed003's tenants program,
// `tenants clients`): one with a single bulk connection, one with four.
// The four-stream process's bulk sends take turns (its stats count
// pauses: preload/c/tenant.c; below 16 CPUs, where its cap is below 4),
// the single stream never waits, and the
// user's board in the run directory (a regular file, mode 0600) names
// both processes. Every connection is accelerated and both move bytes.
// How the bytes are shared is a figure of `sdpshim bench seed003`, not
// judged here.
func TestTenantTurnsBetweenProcesses(t *testing.T) {
	r := runTenants(t, tenantOpts{}, "B", "B:4")
	pauses := map[int]uint64{} // by connection count
	for _, tn := range r.tenants {
		pauses[len(tn.snap.Connections)] = tn.snap.Scheduler.Pauses
	}
	named := 0
	for _, e := range r.board.Entries {
		if r.tenant(e.PID) != nil {
			named++
		}
	}
	for _, tn := range r.report {
		if tn.Bytes == 0 {
			t.Errorf("the %d-stream tenant moved nothing", tn.Conns)
		}
	}
	t.Logf("pauses by streams %v, board %+v, report %s", pauses, r.board, r.out)
	// The 4-stream process's cap (preload/c/tenant.c): the other's demand
	// of 1, or the CPUs over twice the two processes.
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	if p, ok := pauses[4]; !ok || (p == 0) != (cpus.Count()/4 >= 4) {
		t.Errorf("the 4-stream tenant's bulk sends waited for a turn %d times on %d CPUs (pauses %v); want some below 16 CPUs, none from 16",
			p, cpus.Count(), pauses)
	}
	if p := pauses[1]; p != 0 {
		t.Errorf("the 1-stream tenant paused %d times, want never", p)
	}
	if named != 2 {
		t.Errorf("the board names %d of the 2 tenant processes: %+v", named, r.board.Entries)
	}
}

// TestPreemptBetweenProcesses runs a 16-byte ping-pong (D_App) and a bulk
// stream (B_App) as two client processes of one user under the shim
// against one server, every process on one CPU, so that the ping-pong's
// waits lose the CPU to the bulk stream's threads; in the default
// (direct) mode and with SDPSHIM_CHANNEL=shared (a channel per process
// pair). A small message late for the CPU goes onto the user's board as
// its process's starved mark (preload/c/tenant.c): the mark names the
// ping-pong's client or the server, never the bulk tenant, and the bulk
// tenant's sends pause for it (its stats count pauses) as they would for
// a ping-pong of its own process, while the ping-pong's never do. Both
// move bytes. The latency this buys is a figure of `sdpshim bench
// seed003` (the rows "of another process"), not judged here.
func TestPreemptBetweenProcesses(t *testing.T) {
	for _, mode := range []struct {
		name string
		env  []string
	}{{"direct", nil}, {"shared", []string{"SDPSHIM_CHANNEL=shared"}}} {
		t.Run(mode.name, func(t *testing.T) {
			r := runTenants(t, tenantOpts{wrap: oneCPU(t), env: mode.env}, "D", "B")
			var ping, bulk *tenantProc
			for i := range r.tenants {
				tn := &r.tenants[i]
				if len(tn.snap.Connections) != 1 {
					t.Fatalf("pid %d: %d connections, want 1", tn.pid, len(tn.snap.Connections))
				}
				if bulkConn(tn.snap.Connections[0]) {
					bulk = tn
				} else {
					ping = tn
				}
			}
			for _, tn := range r.report {
				if tn.Bytes == 0 {
					t.Errorf("the %s tenant moved nothing", tn.Type)
				}
			}
			t.Logf("board %+v, report %s", r.board, r.out)
			if ping == nil || bulk == nil {
				t.Fatalf("no bulk tenant beside a ping-pong: %+v", r.tenants)
			}
			if p := r.board.StarvedPID; p != ping.pid && p != r.server {
				t.Errorf("the board's starved mark names pid %d; want the ping-pong's client (%d) or the server (%d), the bulk tenant is %d",
					p, ping.pid, r.server, bulk.pid)
			}
			if bulk.snap.Scheduler.Pauses == 0 {
				t.Error("the bulk tenant never paused for the other process's ping-pong")
			}
			if p := ping.snap.Scheduler.Pauses; p != 0 {
				t.Errorf("the ping-pong tenant paused %d times, want never", p)
			}
		})
	}
}

// TestPreemptSharedChannel runs a 16-byte ping-pong (D_App) and a bulk
// stream (B_App) as two connections of one client process under the shim
// with SDPSHIM_CHANNEL=shared (both streams of one channel), against one
// server, every process on one CPU. The shared channel's streams take the
// direct path's CPU preemption (shim/preempt.go): a small message late
// for the CPU marks the process starved, which the user's board shows
// (naming the client or the server), and the bulk stream's sends pause;
// the ping-pong's never do. Both move bytes. The latency is a figure of
// `sdpshim bench seed003`, not judged here.
func TestPreemptSharedChannel(t *testing.T) {
	r := runTenants(t, tenantOpts{wrap: oneCPU(t), env: []string{"SDPSHIM_CHANNEL=shared"}, one: true}, "D", "B")
	if len(r.tenants) != 1 || len(r.tenants[0].snap.Connections) != 2 {
		t.Fatalf("want one client process of 2 connections: %+v", r.tenants)
	}
	cli := r.tenants[0]
	for _, tn := range r.report {
		if tn.Bytes == 0 {
			t.Errorf("the %s tenant moved nothing", tn.Type)
		}
	}
	t.Logf("board %+v, report %s, connections %+v", r.board, r.out, cli.snap.Connections)
	if p := r.board.StarvedPID; p != cli.pid && p != r.server {
		t.Errorf("the board's starved mark names pid %d; want the client (%d) or the server (%d)", p, cli.pid, r.server)
	}
	for _, c := range cli.snap.Connections {
		switch bulk := bulkConn(c); {
		case bulk && c.Pauses == 0:
			t.Error("the bulk stream never paused for the ping-pong")
		case !bulk && c.Pauses != 0:
			t.Errorf("the ping-pong's stream paused %d times, want never", c.Pauses)
		}
	}
}

// bulkConn says whether c is the bulk tenant's: 64 KiB or more a message
// sent (the ping-pong's are 16 bytes; the bulk tenant writes 1 MiB).
func bulkConn(c stats.ConnStats) bool {
	return c.MessagesSent > 0 && c.BytesSent/c.MessagesSent >= 64<<10
}

// oneCPU is the command line prefix that runs a program on the first CPU
// this test may run on.
func oneCPU(t *testing.T) []string {
	t.Helper()
	cpu, err := cpupin.First()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"taskset", "-c", fmt.Sprint(cpu.CPU)}
}

// tenantProc is one tenant process of a runTenants run, with its stats
// read near the end of the run.
type tenantProc struct {
	pid  int
	snap *stats.Snapshot
}

// tenantRun is what runTenants saw.
type tenantRun struct {
	server  int          // the server's pid
	tenants []tenantProc // one per tenant, in no order
	board   rendezvous.Board
	report  []struct {
		Type  string
		Conns int
		Bytes uint64
	}
	out string // the client's report as printed
}

// clientStats is the stats endpoint of process pid in run directory rd,
// when it serves one.
func clientStats(rd string, pid int) []stats.Endpoint {
	eps, _ := stats.List(rd)
	for _, ep := range eps {
		if ep.PID == pid {
			return []stats.Endpoint{ep}
		}
	}
	return nil
}

// tenant is the tenant process of pid, or nil.
func (r *tenantRun) tenant(pid int) *tenantProc {
	for i := range r.tenants {
		if r.tenants[i].pid == pid {
			return &r.tenants[i]
		}
	}
	return nil
}

// tenantOpts are how runTenants runs the tenants.
type tenantOpts struct {
	wrap []string // the command line prefix of each program (none when nil)
	env  []string // the shim's settings beyond the run directory
	one  bool     // every tenant in the client process (`tenants client`)
}

// runTenants runs bench/seed003's tenants program under the shim for 3 s:
// a server, and a client process per tenant of types (`tenants
// clients`), or one client process for all (o.one). Once every client
// process serves stats, and a second after (most of the run), it reads
// their stats and the user's board in the run directory (a regular file,
// mode 0600); then it waits for the client's report. Every connection of
// every tenant must be accelerated.
func runTenants(t *testing.T, o tenantOpts, types ...string) *tenantRun {
	t.Helper()
	a := build(t)
	prog, err := seed003.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rd := runDir(t)
	env := append(a.environ(t, side{shim: true}, rd), o.env...)
	port := freePort(t)
	run := func(args ...string) *proc {
		argv := append(append(append([]string{}, o.wrap...), prog), args...)
		return start(t, env, 60*time.Second, argv[0], argv[1:]...)
	}
	srv := run("server", fmt.Sprint(port))
	waitListen(t, srv, port) // no probing connection: the server would take it for a tenant

	verb, procs := "clients", len(types)
	if o.one {
		verb, procs = "client", 1
	}
	cli := run(append([]string{verb, fmt.Sprint(port), "3"}, types...)...)
	r := &tenantRun{server: srv.cmd.Process.Pid}
	var eps []stats.Endpoint
	for deadline := time.Now().Add(20 * time.Second); len(eps) < procs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d client processes did not serve stats in 20 s (%d did)", procs, len(eps))
		}
		if o.one {
			eps = clientStats(rd, cli.cmd.Process.Pid)
		} else {
			eps = seed003.Children(rd, cli.cmd.Process.Pid)
		}
	}
	time.Sleep(time.Second)
	for _, ep := range eps {
		s, err := stats.Fetch(ep.Path, 5*time.Second)
		if err != nil {
			t.Fatalf("stats of pid %d: %v", ep.PID, err)
		}
		if s.Totals.Accelerated != uint64(len(s.Connections)) {
			t.Errorf("pid %d: %d of %d connections accelerated", ep.PID, s.Totals.Accelerated, len(s.Connections))
		}
		r.tenants = append(r.tenants, tenantProc{pid: ep.PID, snap: s})
	}
	board := filepath.Join(rd, fmt.Sprintf("tenants.%d", os.Geteuid()))
	var st unix.Stat_t
	if err := unix.Lstat(board, &st); err != nil {
		t.Fatalf("no board: %v", err)
	} else if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o777 != 0o600 {
		t.Errorf("board %s: mode %o, want a regular file of mode 0600", board, st.Mode)
	}
	if r.board, err = rendezvous.ReadBoardIn(rd, os.Geteuid()); err != nil {
		t.Fatal(err)
	}
	if err := cli.wait(); err != nil {
		t.Fatalf("tenants clients: %v\n%s", err, cli.errb.String())
	}
	r.out = strings.TrimSpace(cli.out.String())
	var rep struct {
		Tenants []struct {
			Type  string
			Conns int
			Bytes uint64
		}
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || len(rep.Tenants) != len(types) {
		t.Fatalf("report %q: %v", r.out, err)
	}
	r.report = rep.Tenants
	return r
}
