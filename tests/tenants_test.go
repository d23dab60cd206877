package tests

import (
	"bytes"
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
	a := build(t)
	prog, err := seed003.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rd := runDir(t)
	env := a.environ(t, side{shim: true}, rd)
	port := freePort(t)
	srv := start(t, env, 60*time.Second, prog, "server", fmt.Sprint(port))
	waitListen(t, srv, port) // no probing connection: the server would take it for a tenant

	cli := start(t, env, 60*time.Second, prog, "clients", fmt.Sprint(port), "3", "B", "B:4")
	// The tenants' processes (the client's children), once both serve
	// stats, and a second after: most of the run.
	var tenants []stats.Endpoint
	for deadline := time.Now().Add(20 * time.Second); len(tenants) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the 2 tenant processes did not serve stats in 20 s (%d did)", len(tenants))
		}
		tenants = seed003.Children(rd, cli.cmd.Process.Pid)
	}
	time.Sleep(time.Second)
	pauses := map[int]uint64{} // by connection count
	kids := map[int]bool{}
	for _, ep := range tenants {
		s, err := stats.Fetch(ep.Path, 5*time.Second)
		if err != nil {
			t.Fatalf("stats of pid %d: %v", ep.PID, err)
		}
		kids[ep.PID] = true
		pauses[len(s.Connections)] = s.Scheduler.Pauses
		if s.Totals.Accelerated != uint64(len(s.Connections)) {
			t.Errorf("pid %d: %d of %d connections accelerated", ep.PID, s.Totals.Accelerated, len(s.Connections))
		}
	}
	board := filepath.Join(rd, fmt.Sprintf("tenants.%d", os.Geteuid()))
	var st unix.Stat_t
	if err := unix.Lstat(board, &st); err != nil {
		t.Fatalf("no board: %v", err)
	} else if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o777 != 0o600 {
		t.Errorf("board %s: mode %o, want a regular file of mode 0600", board, st.Mode)
	}
	entries, err := rendezvous.ReadBoardIn(rd, os.Geteuid())
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range entries {
		if kids[e.PID] {
			named++
		}
	}

	if err := cli.wait(); err != nil {
		t.Fatalf("tenants clients: %v\n%s", err, cli.errb.String())
	}
	var rep struct {
		Tenants []struct {
			Conns int
			Bytes uint64
		}
	}
	if err := json.Unmarshal(bytes.TrimSpace([]byte(cli.out.String())), &rep); err != nil || len(rep.Tenants) != 2 {
		t.Fatalf("report %q: %v", cli.out.String(), err)
	}
	for _, tn := range rep.Tenants {
		if tn.Bytes == 0 {
			t.Errorf("the %d-stream tenant moved nothing", tn.Conns)
		}
	}
	t.Logf("pauses by streams %v, board %+v, report %s", pauses, entries, strings.TrimSpace(cli.out.String()))
	if len(kids) != 2 {
		t.Fatalf("stats of %d tenant processes, want 2", len(kids))
	}
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
		t.Errorf("the board names %d of the 2 tenant processes: %+v", named, entries)
	}
}
