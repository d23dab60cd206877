package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/probes"
	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

func init() {
	register(&Command{
		Name:    "trace",
		Summary: "live fallbacks of every process, kernel-TCP bytes per connection, silent fallbacks (root)",
		Usage:   "sdpshim trace [--lib PATH] [--interval D] [--duration D] [--all]",
		Help: `Loads eBPF programs (root): uprobes on the core library's probe
functions print every fallback (with its reason) and every accelerated
connection, in any process, as it happens; tp_btf tracepoints count the
bytes each (process, socket) moves through kernel TCP. Each interval it
lists the local connections that moved kernel bytes, judged:

  SILENT-FALLBACK  reported accelerated, yet kernel TCP carries its bytes
  candidate        local TCP where one end or both do not run the shim
  fallback         a shimmed process left it on kernel TCP (reason shown)
  accelerated      reported accelerated, no kernel bytes since

Connections accelerated before trace started are learned from the stats
sockets of the run directories it finds.

  --lib PATH    the core library to probe (default: SDPSHIM_CORE, else
                libsdpshim-core.so beside this executable)
  --interval D  time between reports (default 2s)
  --duration D  stop after D, print a summary (default: run until Ctrl-C)
  --all         list connections to other hosts too

Exit status: 0, or 1 when the programs cannot be loaded (not root).`,
		Run: runTrace,
	})
}

// runTrace implements `sdpshim trace`.
func runTrace(env *Env, args []string) int {
	cmd := commands["trace"]
	fs := cmd.flags(env)
	lib := fs.String("lib", "", "core library to probe")
	interval := fs.Duration("interval", 2*time.Second, "time between reports")
	duration := fs.Duration("duration", 0, "stop after this long")
	all := fs.Bool("all", false, "list connections to other hosts too")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() > 0 || *interval <= 0 || *duration < 0 {
		fmt.Fprintln(env.Stderr, "sdpshim trace: no arguments expected, and durations must be positive")
		cmd.printUsage(env.Stderr)
		return exitUsage
	}
	libPath, warning := coreLibrary(env, *lib)
	shimPath := interposerLibrary(libPath)
	tr, err := probes.Load(probes.Options{Library: libPath, Interposer: shimPath})
	if err != nil && !errors.Is(err, probes.ErrNotPermitted) && shimPath != "" {
		shimPath = "" // an old interposer without the probe: the core's alone
		tr, err = probes.Load(probes.Options{Library: libPath})
	}
	if err != nil && !errors.Is(err, probes.ErrNotPermitted) && libPath != "" {
		warning = err.Error()
		libPath = ""
		tr, err = probes.Load(probes.Options{})
	}
	if errors.Is(err, probes.ErrNotPermitted) {
		fmt.Fprintln(env.Stderr, "sdpshim trace: needs root: the kernel refused to load eBPF programs (CAP_BPF and CAP_PERFMON are required); run it as root")
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim trace: %v\n", err)
		return exitFailure
	}
	defer tr.Close()
	if warning != "" {
		fmt.Fprintf(env.Stderr, "sdpshim trace: warning: %s; fallback events are not traced\n", warning)
	}

	t := &tracer{env: env, tr: tr, all: *all, facts: probes.Facts{
		Accelerated: map[uint64]bool{}, Fallbacks: map[uint64]int{}, IsLocal: probes.LocalAddrs(),
	}, prev: map[connID][2]uint64{}, clock: monotonicOffset()}
	t.seed(env)
	probed := "no probes (no core library; use --lib)"
	if libPath != "" {
		probed = "probes in " + libPath
		if shimPath != "" {
			probed += " and " + shimPath
		}
	}
	fmt.Fprintf(env.Stderr, "sdpshim trace: tracing kernel TCP (sock_send_length, sock_recv_length, inet_sock_set_state) and %s; Ctrl-C to stop\n", probed)

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *duration > 0 {
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	events := make(chan probes.Event, 256)
	go func() {
		defer close(events)
		for {
			ev, err := tr.ReadEvent()
			if err != nil {
				return // closed
			}
			events <- ev
		}
	}()
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case ev, ok := <-events:
			if ok {
				t.event(ev)
			}
		case now := <-tick.C:
			t.report(now.Sub(last).Round(time.Millisecond), false)
			last = now
		case <-ctx.Done():
			t.drain(events)
			t.report(0, true)
			if n := tr.EventsLost(); n > 0 {
				fmt.Fprintf(env.Stderr, "sdpshim trace: %d events lost (the ring buffer was full)\n", n)
			}
			return exitOK
		}
	}
}

// coreLibrary returns the library to probe: the flag, SDPSHIM_CORE, or
// libsdpshim-core.so beside this executable; "" and why when that is
// missing.
func coreLibrary(env *Env, flagValue string) (path, warning string) {
	if flagValue != "" {
		return flagValue, "" // Load reports a bad one
	}
	if c, _ := config.Load(env.Environ); c.CorePath != "" {
		return c.CorePath, ""
	}
	self, err := os.Executable()
	if err != nil {
		return "", "cannot locate the core library (use --lib): " + err.Error()
	}
	p := filepath.Join(filepath.Dir(self), "libsdpshim-core.so")
	if _, err := os.Stat(p); err != nil {
		return "", "no core library at " + p + " (use --lib)"
	}
	return p, ""
}

// interposerLibrary returns libsdpshim.so beside the core library, whose
// fallback probe reports what the interposer decides without the core;
// "" when there is none.
func interposerLibrary(core string) string {
	if core == "" {
		return ""
	}
	p := filepath.Join(filepath.Dir(core), "libsdpshim.so")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

type connID struct {
	pid    uint32
	cookie uint64
}

type tracer struct {
	env   *Env
	tr    *probes.Tracer
	all   bool
	facts probes.Facts
	prev  map[connID][2]uint64 // bytes at the last report
	clock time.Duration        // wall clock minus CLOCK_MONOTONIC
}

// monotonicOffset returns what turns a CLOCK_MONOTONIC time into Unix time.
func monotonicOffset() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(time.Now().UnixNano() - ts.Nano())
}

// seed learns accelerated connections and fallbacks made before the
// tracer started from the stats sockets of every run directory found.
func (t *tracer) seed(env *Env) {
	dirs := []string{runDir(env, ""), "/run/sdpshim"}
	for _, pat := range []string{"/run/user/*/sdpshim", "/tmp/sdpshim-*"} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	slices.Sort(dirs)
	for _, dir := range slices.Compact(dirs) {
		eps, _ := stats.List(dir)
		for _, ep := range eps {
			s, err := stats.Fetch(ep.Path, 500*time.Millisecond)
			if err != nil {
				continue
			}
			for _, c := range s.Connections {
				if c.Cookie != 0 && (c.Transport == "shm" || c.Transport == "rdma") {
					t.facts.Accelerated[c.Cookie] = true
					t.tr.MarkAccelerated(c.Cookie, s.Time.Sub(s.Process.Started)) // any time: only presence matters
				}
			}
			for _, f := range s.RecentFallbacks {
				if f.Cookie != 0 {
					t.facts.Fallbacks[f.Cookie] = f.Code
				}
			}
		}
	}
}

// event prints one probe event and remembers what it says.
func (t *tracer) event(ev probes.Event) {
	at := time.Unix(0, int64(ev.Time+t.clock)).Format("15:04:05.000")
	what := ""
	switch ev.Kind {
	case probes.EventFallback:
		what = "reason=" + reasonText(ev.Code, stats.ReasonName(ev.Code))
		if ev.Cookie != 0 {
			t.facts.Fallbacks[ev.Cookie] = ev.Code
		}
	case probes.EventAccelerated:
		what = "transport=" + stats.Transport(ev.Code).String()
		if ev.Cookie != 0 {
			t.facts.Accelerated[ev.Cookie] = true
			delete(t.facts.Fallbacks, ev.Cookie)
		}
	}
	fmt.Fprintf(t.env.Stdout, "%s %-11s pid=%d comm=%s fd=%d %s cookie=%d\n", at, ev.Kind, ev.PID, ev.Comm, ev.FD, what, ev.Cookie)
}

func (t *tracer) drain(events <-chan probes.Event) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			t.event(ev)
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// report prints the connections that moved kernel bytes in the last
// period (final: every one seen, with totals).
func (t *tracer) report(period time.Duration, final bool) {
	conns, err := t.tr.Conns()
	if err != nil {
		fmt.Fprintf(t.env.Stderr, "sdpshim trace: read connections: %v\n", err)
		return
	}
	states, _ := t.tr.States()
	shimmed := map[uint32]bool{}
	t.facts.Shimmed = func(pid uint32) bool {
		v, ok := shimmed[pid]
		if !ok {
			v = probes.ShimmedPID(pid)
			shimmed[pid] = v
		}
		return v
	}
	rows := probes.Classify(conns, states, t.facts)
	var out []probes.Row
	for _, r := range rows {
		id := connID{r.PID, r.Cookie}
		p := t.prev[id]
		moved := r.Sent > p[0] || r.Received > p[1]
		t.prev[id] = [2]uint64{r.Sent, r.Received}
		if (moved || final) && (t.all || r.Verdict != probes.VerdictRemote) {
			out = append(out, r)
		}
	}
	if len(out) > 0 {
		w := t.env.Stdout
		if final {
			fmt.Fprintf(w, "%s summary, kernel TCP since start:\n", time.Now().Format("15:04:05"))
		} else {
			fmt.Fprintf(w, "%s kernel TCP, last %s:\n", time.Now().Format("15:04:05"), period)
		}
		writeRows(w, out)
	}
	for _, r := range rows {
		if r.State == probes.TCPClose && !final {
			t.tr.Forget(r.PID, r.Cookie)
			delete(t.prev, connID{r.PID, r.Cookie})
		}
	}
}

func writeRows(w io.Writer, rows []probes.Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PID\tCOMM\tLOCAL\tREMOTE\tPEER\tKERNEL-TX\tKERNEL-RX\tVERDICT")
	for _, r := range rows {
		peer := "-"
		if r.PeerPID != 0 {
			peer = fmt.Sprintf("%d/%s", r.PeerPID, r.PeerComm)
		}
		verdict := r.Verdict.String()
		switch r.Verdict {
		case probes.VerdictFallback:
			verdict += " " + reasonText(r.Reason, stats.ReasonName(r.Reason))
		case probes.VerdictCandidate:
			verdict += " " + shimNote(r)
		case probes.VerdictSilentFallback:
			verdict += fmt.Sprintf(" (%s after acceleration)", bytesText(r.SentAccel+r.ReceivedAccel))
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.PID, r.Comm, r.Tuple.Local, r.Tuple.Remote, peer,
			bytesText(r.Sent), bytesText(r.Received), verdict)
	}
	tw.Flush()
}

// shimNote says which ends of a candidate lack the shim.
func shimNote(r probes.Row) string {
	switch {
	case !r.Shimmed && r.PeerPID != 0 && !r.PeerShimmed:
		return "(neither end runs the shim)"
	case !r.Shimmed:
		return "(this end does not run the shim)"
	}
	return "(the peer does not run the shim)"
}
