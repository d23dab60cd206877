package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

func init() {
	register(&Command{
		Name:    "top",
		Summary: "refreshing view of shimmed processes and their busiest connections, with rates",
		Usage:   "sdpshim top [--interval D] [--once] [--rundir DIR]",
		Help: `Reads every shimmed process's stats (as sdpshim stats does) each
interval and shows rates: bytes and messages per second each way, new
fallbacks and credit stalls per second, per process, then the busiest
connections. Ends on Ctrl-C.

  --interval D  time between refreshes (default 1s)
  --once        take two samples one interval apart, print one view, exit
  --rundir DIR  the run directory (default: SDPSHIM_RUNDIR, or its default)`,
		Run: runTop,
	})
}

// topConns is how many connections the view lists.
const topConns = 10

// runTop implements `sdpshim top`.
func runTop(env *Env, args []string) int {
	cmd := commands["top"]
	fs := cmd.flags(env)
	interval := fs.Duration("interval", time.Second, "time between refreshes")
	once := fs.Bool("once", false, "print one view and exit")
	rundir := fs.String("rundir", "", "run directory")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 || *interval <= 0 {
		fmt.Fprintln(env.Stderr, "sdpshim top: no arguments expected, and --interval must be positive")
		cmd.printUsage(env.Stderr)
		return exitUsage
	}
	dir := runDir(env, *rundir)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	prev := sampleAll(env, dir)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
		cur := sampleAll(env, dir)
		if !*once {
			fmt.Fprint(env.Stdout, "\x1b[H\x1b[2J") // home, clear
		}
		writeTop(env.Stdout, dir, prev, cur)
		if *once {
			return exitOK
		}
		prev = cur
	}
}

// sampleAll reads every live process's snapshot, by pid.
func sampleAll(env *Env, dir string) map[int]*stats.Snapshot {
	snaps, _ := fetchSnapshots(&Env{Stdout: env.Stdout, Stderr: io.Discard, Environ: env.Environ}, "top", dir, 0)
	m := make(map[int]*stats.Snapshot, len(snaps))
	for _, s := range snaps {
		m[s.Process.PID] = s
	}
	return m
}

// rate returns the per-second increase from a to b over d (0 when the
// counter went back: a new process with the same pid).
func rate(a, b uint64, d time.Duration) float64 {
	if b < a || d <= 0 {
		return 0
	}
	return float64(b-a) / d.Seconds()
}

func rateText(r float64, bytes bool) string {
	if bytes {
		return bytesText(uint64(r + 0.5))
	}
	return fmt.Sprintf("%.0f", r)
}

// writeTop prints one view: processes, then the busiest connections.
func writeTop(w io.Writer, dir string, prev, cur map[int]*stats.Snapshot) {
	pids := make([]int, 0, len(cur))
	for pid := range cur {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	fmt.Fprintf(w, "sdpshim top - %s - %d shimmed processes (%s)\n\n", time.Now().Format("15:04:05"), len(pids), dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PID\tCOMMAND\tOPEN\tTX/s\tRX/s\tMSG-TX/s\tMSG-RX/s\tFALLBACK/s\tSTALLS/s\tUTIL\t")
	type connRate struct {
		pid     int
		comm    string
		c       stats.ConnStats
		tx, rx  float64
		ordered float64
	}
	var conns []connRate
	for _, pid := range pids {
		s, p := cur[pid], prev[pid]
		if p == nil || p.Process.Started != s.Process.Started {
			p = &stats.Snapshot{Time: s.Process.Started} // new since the last sample: rates since it started
		}
		d := s.Time.Sub(p.Time)
		t, pt := s.Totals, p.Totals
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", pid, s.Process.Comm, t.ConnsOpen,
			rateText(rate(pt.BytesSent, t.BytesSent, d), true), rateText(rate(pt.BytesReceived, t.BytesReceived, d), true),
			rateText(rate(pt.MessagesSent, t.MessagesSent, d), false), rateText(rate(pt.MessagesReceived, t.MessagesReceived, d), false),
			rateText(rate(pt.Fallbacks, t.Fallbacks, d), false), rateText(rate(p.Flow.Stalls, s.Flow.Stalls, d), false),
			percent(s.Flow.Utilisation))
		before := map[uint64]stats.ConnStats{}
		for _, c := range p.Connections {
			before[c.ID] = c
		}
		for _, c := range s.Connections {
			b, seen := before[c.ID]
			cd := d
			if !seen {
				b, cd = stats.ConnStats{}, s.Time.Sub(c.Opened)
			}
			r := connRate{pid: pid, comm: s.Process.Comm, c: c,
				tx: rate(b.BytesSent, c.BytesSent, cd), rx: rate(b.BytesReceived, c.BytesReceived, cd)}
			r.ordered = r.tx + r.rx
			conns = append(conns, r)
		}
	}
	tw.Flush()
	if len(conns) == 0 {
		return
	}
	slices.SortStableFunc(conns, func(a, b connRate) int {
		switch {
		case a.ordered > b.ordered:
			return -1
		case a.ordered < b.ordered:
			return 1
		}
		return 0
	})
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tCOMMAND\tFD\tPEER\tTRANSPORT\tREASON\tTX/s\tRX/s\tSENT\tRECEIVED")
	for _, r := range conns[:min(len(conns), topConns)] {
		c := r.c
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.pid, r.comm, c.FD, dash(c.Peer), c.Transport,
			reasonText(c.Reason, c.ReasonName), rateText(r.tx, true), rateText(r.rx, true), bytesText(c.BytesSent), bytesText(c.BytesReceived))
	}
	tw.Flush()
}
