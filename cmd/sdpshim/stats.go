package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

func init() {
	register(&Command{
		Name:    "stats",
		Summary: "show the counters of shimmed processes (table, JSON or Prometheus text)",
		Usage:   "sdpshim stats [--json | --prom] [--rundir DIR] [PID]",
		Help: `Reads the stats socket of every shimmed process of this user (in the
run directory; sockets of dead processes are skipped) and prints one line
per process, or, with PID, that process in detail: its connections
(transport, fallback reason, bytes and messages each way, flow
controller), channels, flow control, waiters and fallbacks by reason.
The table is followed by the processes of this user that sent bulk data
in the last second and take turns for it (the tenant board), if any.
Processes serve stats unless started with SDPSHIM_STATS=0.

  --json        print the snapshots as JSON (an array; one object with PID)
  --prom        print them in the Prometheus text exposition format
  --rundir DIR  the run directory (default: SDPSHIM_RUNDIR, or its default)

Exit status: 0, or 1 when a process could not be read.`,
		Run: runStats,
	})
}

// fetchTimeout bounds the read of one process's snapshot.
const fetchTimeout = 2 * time.Second

// runStats implements `sdpshim stats`.
func runStats(env *Env, args []string) int {
	cmd := commands["stats"]
	fs := cmd.flags(env)
	asJSON := fs.Bool("json", false, "print JSON")
	asProm := fs.Bool("prom", false, "print Prometheus text")
	rundir := fs.String("rundir", "", "run directory")
	if code, done := parse(fs, args); done {
		return code
	}
	pid, ok := pidArg(env, cmd, fs.Args())
	if !ok || (*asJSON && *asProm) {
		if ok {
			fmt.Fprintln(env.Stderr, "sdpshim stats: --json and --prom exclude each other")
			cmd.printUsage(env.Stderr)
		}
		return exitUsage
	}
	dir := runDir(env, *rundir)
	snaps, failed := fetchSnapshots(env, "stats", dir, pid)
	if pid != 0 && len(snaps) == 0 {
		return exitFailure
	}
	var err error
	switch {
	case *asJSON:
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if pid != 0 {
			err = enc.Encode(snaps[0])
		} else {
			err = enc.Encode(nonNil(snaps))
		}
	case *asProm:
		err = stats.WriteProm(env.Stdout, snaps)
	case pid != 0:
		writeDetail(env.Stdout, snaps[0])
	case len(snaps) == 0 && !failed:
		fmt.Fprintf(env.Stdout, "no shimmed process serves stats in %s\n", dir)
	default:
		writeTable(env.Stdout, snaps)
		writeTenants(env.Stdout, dir)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim stats: %v\n", err)
		return exitFailure
	}
	if failed {
		return exitFailure
	}
	return exitOK
}

func nonNil(s []*stats.Snapshot) []*stats.Snapshot {
	if s == nil {
		return []*stats.Snapshot{}
	}
	return s
}

// pidArg parses the optional PID argument; 0 when absent.
func pidArg(env *Env, cmd *Command, args []string) (int, bool) {
	switch len(args) {
	case 0:
		return 0, true
	case 1:
		if pid, err := strconv.Atoi(args[0]); err == nil && pid > 0 {
			return pid, true
		}
		fmt.Fprintf(env.Stderr, "sdpshim %s: %q is not a pid\n", cmd.Name, args[0])
	default:
		fmt.Fprintf(env.Stderr, "sdpshim %s: one PID at most\n", cmd.Name)
	}
	cmd.printUsage(env.Stderr)
	return 0, false
}

// runDir returns the run directory: the flag, else the configured one.
func runDir(env *Env, flagValue string) string {
	if flagValue != "" {
		return filepath.Clean(flagValue)
	}
	c, _ := config.Load(env.Environ) // complete even when a knob is bad
	return c.RunDir
}

// fetchSnapshots reads pid's snapshot, or every live process's when pid
// is 0. Problems go to stderr; failed is true when a live process could
// not be read. Stale sockets are skipped silently (named, with pid).
func fetchSnapshots(env *Env, name, dir string, pid int) (snaps []*stats.Snapshot, failed bool) {
	var eps []stats.Endpoint
	if pid != 0 {
		eps = []stats.Endpoint{{PID: pid, Path: filepath.Join(dir, stats.SockName(pid))}}
	} else {
		var err error
		if eps, err = stats.List(dir); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim %s: %v\n", name, err)
			return nil, true
		}
	}
	for _, ep := range eps {
		s, err := stats.Fetch(ep.Path, fetchTimeout)
		switch {
		case err == nil:
			snaps = append(snaps, s)
		case pid != 0 && (errors.Is(err, stats.ErrStale) || errors.Is(err, os.ErrNotExist)):
			fmt.Fprintf(env.Stderr, "sdpshim %s: process %d serves no stats in %s (not shimmed, SDPSHIM_STATS=0, or another run directory)\n", name, pid, dir)
			failed = true
		case errors.Is(err, stats.ErrStale):
		default:
			fmt.Fprintf(env.Stderr, "sdpshim %s: process %d: %v\n", name, ep.PID, err)
			failed = true
		}
	}
	return snaps, failed
}

// writeTable prints one line per process.
func writeTable(w io.Writer, snaps []*stats.Snapshot) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PID\tCOMMAND\tOPEN\tACCEL\tFALLBACK\tSENT\tRECEIVED\tMSGS-TX\tMSGS-RX\tSTALLS\tUTIL\t")
	for _, s := range snaps {
		t := s.Totals
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t\n", s.Process.PID, s.Process.Comm,
			t.ConnsOpen, t.Accelerated, t.Fallbacks, bytesText(t.BytesSent), bytesText(t.BytesReceived),
			t.MessagesSent, t.MessagesReceived, s.Flow.Stalls, percent(s.Flow.Utilisation))
	}
	tw.Flush()
}

// tenantsShown is how recent a board entry must be for the table: a
// process that sent bulk data within it.
const tenantsShown = time.Second

// writeTenants prints, after the process table, the processes of this
// user that sent bulk data lately and take turns for it (their entries on
// the tenant board, docs/direct.md "Tenants"), and the process whose
// small message was late lately, on which bulk sends pause: nothing when
// there are none or no board.
func writeTenants(w io.Writer, dir string) {
	b, err := rendezvous.ReadBoardIn(dir, os.Geteuid())
	if err != nil {
		return
	}
	now := rendezvous.BoardNow()
	if age := now - b.StarvedAt; b.StarvedPID != 0 && age >= 0 && age < tenantsShown {
		fmt.Fprintf(w, "\nsmall messages late for the CPU in pid %d %s ago: bulk sends of this user pause for them (preemption)\n",
			b.StarvedPID, age.Round(time.Millisecond))
	}
	var recent []rendezvous.TenantEntry
	for _, e := range b.Entries {
		if age := now - e.Beat; age >= 0 && age < tenantsShown {
			recent = append(recent, e)
		}
	}
	if len(recent) == 0 {
		return
	}
	fmt.Fprintln(w, "\nbulk senders taking turns (the tenant board; a process copies on at most as many streams at once as the least of the others wants):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PID\tSTREAMS\tLAST\t")
	for _, e := range recent {
		fmt.Fprintf(tw, "%d\t%d\t%s ago\t\n", e.PID, e.Demand, (now - e.Beat).Round(time.Millisecond))
	}
	tw.Flush()
}

// bytesText renders a byte count with a binary unit: 512B, 4.0KiB, 1.5GiB.
func bytesText(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + string(units[i]) + "iB"
}

func percent(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }
