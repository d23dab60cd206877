package seed003

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/freeport"
	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// mode is how the two processes of a run talk: the table's columns.
type mode struct {
	name string
	shim bool     // under the preload, with a private run directory
	env  []string // the shim's settings for the mode
}

// Indexes of modes.
const (
	kernel = iota
	shared
	sharedOff
	direct
	directOff
)

var modes = []mode{
	kernel:    {name: "kernel TCP"},
	shared:    {name: "shared", shim: true, env: []string{"SDPSHIM_CHANNEL=shared"}},
	sharedOff: {name: "shared PREEMPT=0", shim: true, env: []string{"SDPSHIM_CHANNEL=shared", "SDPSHIM_PREEMPT=0"}},
	direct:    {name: "direct", shim: true}, // the default channel mode: nothing set
	directOff: {name: "direct PREEMPT=0", shim: true, env: []string{"SDPSHIM_PREEMPT=0"}},
}

// workload is one client run: its tenants, as `tenants client` takes
// them, in one process, or each in a process of its own (procs:
// `tenants clients`).
type workload struct {
	key     string // the prefix of its figures' keys (figures.go)
	tenants []string
	procs   bool
}

var workloads = []workload{
	{"d", []string{"D"}, false},
	{"db", []string{"D", "B"}, false},
	{"b", []string{"B"}, false},
	{"m", []string{"M"}, false},
	{"mb", []string{"M", "B"}, false},
	// The same pairs as two applications: D_App (or M_App) and B_App
	// each in a client process of its own, against the one server.
	{"dbp", []string{"D", "B"}, true},
	{"mbp", []string{"M", "B"}, true},
	// PeRF's tenants are applications: to the shim, processes.
	{"share", []string{"B", "B:16"}, true},
	// The same streams in one process: one tenant of 17 streams, which
	// the shim shares by stream (the shared channel's stream-level
	// preemption, the CPU's threads on the direct path).
	{"streams", []string{"B", "B:16"}, false},
}

// conns is the number of connections the workload's client opens.
func (w workload) conns() int {
	n := 0
	for _, t := range w.tenants {
		k := 1
		if _, c, ok := strings.Cut(t, ":"); ok {
			fmt.Sscan(c, &k)
		}
		n += k
	}
	return n
}

// plan is how much the section measures.
type plan struct {
	repeats int
	seconds float64 // one client run, its first tenth a warm-up
}

func planFor(quick bool) plan {
	if quick {
		return plan{repeats: 1, seconds: 1}
	}
	return plan{repeats: 3, seconds: 2}
}

// Config is one run of the section.
type Config struct {
	// Lib is libsdpshim.so (libsdpshim-core.so beside it).
	Lib string
	// Environ is the environment the programs start from; its
	// LD_PRELOAD and SDPSHIM_* settings are dropped (each mode sets its
	// own).
	Environ []string
	// Quick takes one short repeat (a smoke run).
	Quick bool
	// Out receives the table; Log progress lines (may be io.Discard).
	Out, Log io.Writer
	// Rec records every figure; nil records nothing.
	Rec *results.Recorder
}

// Run measures every workload in every mode, repeat after repeat (the
// modes' order reversed every other repeat), writes the table and
// records the figures. A run that fails is noted under the table and
// its figures are missing; the error is non-nil only when nothing could
// be measured.
func Run(cfg Config) error {
	pl := planFor(cfg.Quick)
	tmp, err := os.MkdirTemp("", "sdpshim-bench-seed003-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prog, err := Build(tmp)
	if err != nil {
		return err
	}
	h := &harness{prog: prog, lib: cfg.Lib, tmp: tmp, plan: pl, log: cfg.Log}
	for _, kv := range cfg.Environ {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_") {
			h.base = append(h.base, kv)
		}
	}
	load := loadAverage()
	runs := make([][]sample, pl.repeats)
	var notes []string
	for r := range runs {
		runs[r] = make([]sample, len(modes))
		for i := range modes {
			m := i
			if r%2 == 1 {
				m = len(modes) - 1 - i
			}
			var errs []error
			runs[r][m], errs = h.measure(m, r)
			for _, err := range errs {
				if n := fmt.Sprintf("%s: %v", modes[m].name, err); !slices.Contains(notes, n) {
					notes = append(notes, n)
				}
			}
		}
		derive(runs[r])
	}
	fmt.Fprintf(cfg.Out, "PeRF's tenants (csrc/tenants.c), one client process (a process per tenant for the 1- and 16-stream tenants and the rows \"of another process\") and one server process; kernel TCP and sdpshim, same run, median of %d repeat(s) of %g s each (the first tenth a warm-up)\n",
		pl.repeats, pl.seconds)
	fmt.Fprintf(cfg.Out, "%d CPUs, load average %s at the start (other processes share the CPUs)\n", runtime.NumCPU(), load)
	writeTable(cfg.Out, runs)
	record(cfg.Rec, runs)
	for _, n := range notes {
		fmt.Fprintln(cfg.Out, "note:", n)
	}
	for _, run := range runs {
		for _, s := range run {
			if len(s) > 0 {
				return nil
			}
		}
	}
	return errors.New("nothing measured")
}

// harness runs the tenants program.
type harness struct {
	prog, lib, tmp string
	base           []string // the environment without the shim's settings
	plan           plan
	log            io.Writer
}

// environ is a program's environment in mode m with run directory rd
// (never nil: exec gives a nil environment this process's own).
func (h *harness) environ(m mode, rd string) []string {
	out := append([]string{}, h.base...)
	if m.shim {
		out = append(out, "LD_PRELOAD="+h.lib, "SDPSHIM_RUNDIR="+rd)
		out = append(out, m.env...)
	}
	return out
}

// measure runs every workload in mode m against one server and returns
// the figures of those that ran, and why the others did not.
func (h *harness) measure(m int, repeat int) (sample, []error) {
	md := modes[m]
	rd := ""
	if md.shim {
		// A private run directory: the shim makes rd, mode 0700, in a
		// fresh directory of ours.
		d, err := os.MkdirTemp(h.tmp, "rd")
		if err != nil {
			return nil, []error{err}
		}
		rd = filepath.Join(d, "run")
	}
	port, err := freeport.Loopback()
	if err != nil {
		return nil, []error{err}
	}
	env := h.environ(md, rd)
	srv, err := startServer(h.prog, env, port)
	if err != nil {
		return nil, []error{err}
	}
	defer srv.stop()
	s := sample{}
	var errs []error
	var carried stats.Totals // the server's counters after the last run
	for _, w := range workloads {
		if w.key == "m" {
			// The machine's cache-line round trip right before M_App
			// alone, whose rate follows it (docs/benchmarks.md).
			if ns, err := lineNS(h.prog, h.base); err == nil {
				s["m.line"] = ns
			} else {
				errs = append(errs, err)
			}
		}
		t0 := time.Now()
		out, snaps, err := runClient(h.prog, env, rd, port, h.plan.seconds, w)
		fmt.Fprintf(h.log, "seed003: %s, %s, repeat %d/%d: %.1f s\n", strings.Join(w.tenants, " "), md.name, repeat+1, h.plan.repeats, time.Since(t0).Seconds())
		var rep report
		if err == nil {
			rep, err = parseReport(out, w.tenants)
		}
		if err == nil && md.shim {
			err = checkCarried(rd, srv.cmd.Process.Pid, w, &carried)
		}
		for _, snap := range snaps {
			if err == nil && (m == shared || m == sharedOff) {
				err = oneChannel(snap)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", strings.Join(w.tenants, " "), err))
			continue
		}
		for k, v := range w.figures(rep) {
			s[k] = v
		}
		for k, v := range w.scheduler(snaps) {
			s[k] = v
		}
	}
	return s, errs
}

// checkCarried fails a shimmed run that the shim did not carry: the
// server must have accelerated each of the workload's connections since
// the last run (last, updated), and none may have fallen back.
func checkCarried(rd string, pid int, w workload, last *stats.Totals) error {
	snap := snapshotOf(rd, pid)
	if snap == nil {
		return errors.New("no stats from the server")
	}
	acc, fell := snap.Totals.Accelerated-last.Accelerated, snap.Totals.Fallbacks-last.Fallbacks
	*last = snap.Totals
	if acc != uint64(w.conns()) || fell != 0 {
		return fmt.Errorf("not carried by the shim: %d of %d connections accelerated, %d fell back", acc, w.conns(), fell)
	}
	return nil
}

// oneChannel fails a shared-mode run whose client process's connections
// were not all on one channel.
func oneChannel(snap *stats.Snapshot) error {
	seen := map[uint64]bool{}
	for _, c := range snap.Connections {
		seen[c.Channel] = true
	}
	if len(seen) > 1 {
		return fmt.Errorf("SDPSHIM_CHANNEL=shared: the client's %d connections are on %d channels", len(snap.Connections), len(seen))
	}
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
