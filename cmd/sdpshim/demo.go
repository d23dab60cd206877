package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

func init() {
	register(&Command{
		Name:    "demo",
		Summary: "compare kernel TCP and sdpshim on bundled ping-pong and streaming programs",
		Usage:   "sdpshim demo [--json] [--repeats N] [--duration D | --count N] [--env NAME=VALUE]... [--lib PATH | --no-preload] [--bin DIR | --src DIR]",
		Help: `Builds two plain-sockets C programs (demo/pingpong.c, demo/stream.c;
they know nothing of sdpshim) and runs each measurement over 127.0.0.1,
once over kernel TCP (no preload) and once with libsdpshim.so preloaded
into both server and client, alternating the two over the repeats. Prints
one table of medians: half round-trip latency p50/p99 at 64 B and 4 KiB,
throughput at 256 B, 4 KiB and 64 KiB, with the speed-up of sdpshim
(above 1 = sdpshim faster) and the transport that carried the sdpshim runs.

  --json            print the table, every run and the transport findings as JSON
  --repeats N       runs per cell; the cell is their median (default 3)
  --duration D      length of each run, e.g. 500ms or 2s (default 500ms)
  --count N         fixed size runs instead: N round trips / N messages
  --warmup N        ping-pong round trips before recording (default 200)
  --timeout D       limit on each run; a run past it is killed and reported
                    (default 10s plus twice --duration)
  --env NAME=VALUE  set a variable for the sdpshim column (repeatable)
  --lib PATH        the interposer (default: libsdpshim.so beside this executable)
  --no-preload      run the sdpshim column without the interposer: a stand-in
                    that compares kernel TCP with itself (for tests)
  --bin DIR         use prebuilt DIR/pingpong and DIR/stream
  --src DIR         directory of pingpong.c and stream.c (default: ./demo, else
                    ../demo beside this executable); built with $CC (default gcc)

Which transport carried a run is judged two ways. The shim's own report
(sdpshim stats) is used when the shim can give one. Independently, the
kernel's byte counters of the connection are sampled while it runs
(sock_diag, tcpi_bytes_received of the server's socket): an accelerated
connection leaves ~0 of its payload on kernel TCP.

Exit status: 0 when every run succeeded, 1 when a run failed (the table
shows what was measured, the errors follow), 2 on a usage error.`,
		Run: runDemo,
	})
}

// demoMeasure is one measurement the demo programs make.
type demoMeasure struct {
	Test string `json:"test"` // "pingpong" or "stream"
	Size int    `json:"size"`
}

var demoMeasures = []demoMeasure{
	{"pingpong", 64}, {"pingpong", 4096},
	{"stream", 256}, {"stream", 4096}, {"stream", 65536},
}

// demoRowSpec is one row of the table: a metric of one measurement.
type demoRowSpec struct {
	name, label string
	measure     int    // index in demoMeasures
	metric      string // key of the program's result line
	unit        string
	higherWins  bool
}

var demoRowSpecs = []demoRowSpec{
	{"latency_64B_p50", "latency 64 B, half RTT p50", 0, "half_rtt_p50_us", "us", false},
	{"latency_64B_p99", "latency 64 B, half RTT p99", 0, "half_rtt_p99_us", "us", false},
	{"latency_4KiB_p50", "latency 4 KiB, half RTT p50", 1, "half_rtt_p50_us", "us", false},
	{"latency_4KiB_p99", "latency 4 KiB, half RTT p99", 1, "half_rtt_p99_us", "us", false},
	{"throughput_256B", "throughput 256 B", 2, "mb_per_s", "MB/s", true},
	{"throughput_4KiB", "throughput 4 KiB", 3, "mb_per_s", "MB/s", true},
	{"throughput_64KiB", "throughput 64 KiB", 4, "mb_per_s", "MB/s", true},
}

const (
	modeKernel = "kernel"
	modeShim   = "sdpshim"
)

// Transport verdicts of one run.
const (
	viaKernel      = "kernel TCP"
	viaAccelerated = "accelerated"
	viaMixed       = "mixed"
	viaUnknown     = "unknown"
)

// errSkipped marks a run not made because its column's earlier runs of
// the same program hung.
const errSkipped = "skipped: two earlier runs of this program in this column went past --timeout"

// demoOptions are the parsed flags.
type demoOptions struct {
	json      bool
	repeats   int
	duration  time.Duration
	count     int
	warmup    int
	timeout   time.Duration
	env       envList
	lib       string
	noPreload bool
	bin, src  string
}

// demoTransport is what the demo found out about the transport of a run.
type demoTransport struct {
	// Via is the verdict: viaKernel, viaAccelerated, viaMixed or viaUnknown.
	Via string `json:"via"`
	// Why explains the verdict in words.
	Why string `json:"why"`
	// KernelBytes is the largest tcpi_bytes_received seen on the server's
	// socket; AppBytes what the server program read. KernelShare is their
	// ratio, absent when the connection was never sampled.
	KernelBytes uint64   `json:"kernel_bytes"`
	AppBytes    uint64   `json:"app_bytes"`
	KernelShare *float64 `json:"kernel_share,omitempty"`
	Samples     int      `json:"samples"`
	// Coverage is the share of the run's time before the last sample that
	// saw the connection (the later, the more the share can be trusted).
	Coverage float64 `json:"coverage"`
	// Shim is the shim's own answer (sdpshim stats), "" when it cannot tell.
	Shim string `json:"shim,omitempty"`
}

// demoRun is one run of one measurement in one mode.
type demoRun struct {
	Test      string             `json:"test"`
	Size      int                `json:"size"`
	Mode      string             `json:"mode"`
	Repeat    int                `json:"repeat"`
	Values    map[string]float64 `json:"values,omitempty"`
	Transport *demoTransport     `json:"transport,omitempty"`
	Error     string             `json:"error,omitempty"`
}

// demoRow is one row of the result.
type demoRow struct {
	Name       string    `json:"name"`
	Label      string    `json:"label"`
	Unit       string    `json:"unit"`
	Kernel     *float64  `json:"kernel"`
	Sdpshim    *float64  `json:"sdpshim"`
	Speedup    *float64  `json:"speedup"`
	KernelRuns []float64 `json:"kernel_runs"`
	ShimRuns   []float64 `json:"sdpshim_runs"`
	// Msgs are messages/s medians for throughput rows.
	KernelMsgs *float64 `json:"kernel_msgs_per_s,omitempty"`
	ShimMsgs   *float64 `json:"sdpshim_msgs_per_s,omitempty"`
	// Via summarises the transport of the sdpshim runs of this row.
	Via string `json:"sdpshim_via"`
	// Spread is the largest max/min ratio of the runs within one cell of
	// this row: speed-ups closer to 1 than this are within the noise.
	Spread *float64 `json:"spread,omitempty"`
}

// demoReport is the whole result, as --json prints it.
type demoReport struct {
	Settings struct {
		Repeats    int      `json:"repeats"`
		DurationS  float64  `json:"duration_s,omitempty"`
		Count      int      `json:"count,omitempty"`
		Warmup     int      `json:"warmup"`
		Preload    string   `json:"preload"`
		ShimColumn string   `json:"sdpshim_column"`
		Env        []string `json:"env"`
	} `json:"settings"`
	Rows      []demoRow `json:"rows"`
	Transport []string  `json:"transport"`
	Notes     []string  `json:"notes,omitempty"`
	Errors    []string  `json:"errors,omitempty"`
	Runs      []demoRun `json:"runs"`
}

// demoShimAnswer is what the shim itself says about a connection.
type demoShimAnswer struct {
	Known       bool   // false: the shim cannot tell (yet)
	Accelerated bool   // the connection's bytes moved off kernel TCP
	Detail      string // transport, fallback reason, ... in words
}

// demoShimReport asks the shim which transport carried the connection
// that the server process pid accepted on port (127.0.0.1): it reads pid's
// stats socket in rundir. The demo calls it about every 100 ms while the
// server runs and keeps the last known answer; Known is false while the
// socket cannot be read (stats off, the process not started yet).
var demoShimReport = func(rundir string, pid, port int) demoShimAnswer {
	s, err := stats.Fetch(filepath.Join(rundir, stats.SockName(pid)), 200*time.Millisecond)
	if err != nil {
		return demoShimAnswer{}
	}
	local := "127.0.0.1:" + strconv.Itoa(port)
	for _, c := range s.Connections {
		if c.Local != local {
			continue
		}
		detail := c.Transport
		if c.ReasonName != "" {
			detail += ", " + c.ReasonName
		}
		return demoShimAnswer{Known: true, Accelerated: c.Transport != "tcp-fallback", Detail: detail}
	}
	for _, f := range s.RecentFallbacks {
		if f.Local == local {
			return demoShimAnswer{Known: true, Detail: fmt.Sprintf("tcp fallback, %s(%d)", f.Name, f.Code)}
		}
	}
	return demoShimAnswer{}
}

// demoShimReportMissing is printed while demoShimReport cannot answer.
const demoShimReportMissing = "the shim's own report: not available (no stats socket answered; SDPSHIM_STATS=0?)"

func runDemo(env *Env, args []string) int {
	cmd := commands["demo"]
	fs := cmd.flags(env)
	var o demoOptions
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.IntVar(&o.repeats, "repeats", 3, "runs per cell")
	fs.DurationVar(&o.duration, "duration", 500*time.Millisecond, "length of each run")
	fs.IntVar(&o.count, "count", 0, "round trips / messages per run instead of --duration")
	fs.IntVar(&o.warmup, "warmup", 200, "ping-pong warm-up round trips")
	fs.DurationVar(&o.timeout, "timeout", 0, "limit on each run")
	fs.Var(&o.env, "env", "NAME=VALUE for the sdpshim column (repeatable)")
	fs.StringVar(&o.lib, "lib", "", "path of libsdpshim.so")
	fs.BoolVar(&o.noPreload, "no-preload", false, "sdpshim column without the interposer")
	fs.StringVar(&o.bin, "bin", "", "directory of prebuilt pingpong and stream")
	fs.StringVar(&o.src, "src", "", "directory of pingpong.c and stream.c")
	if code, done := parse(fs, args); done {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.Stderr, "sdpshim demo: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case o.repeats < 1 || o.repeats > 1000:
		return usageErr("--repeats: expected 1 to 1000, got %d", o.repeats)
	case o.count < 0 || o.count > 100000000:
		return usageErr("--count: expected 1 to 100000000, got %d", o.count)
	case o.count == 0 && (o.duration < time.Millisecond || o.duration > time.Hour):
		return usageErr("--duration: expected 1ms to 1h, got %v", o.duration)
	case o.warmup < 0 || o.warmup > 100000000:
		return usageErr("--warmup: expected 0 to 100000000, got %d", o.warmup)
	case o.timeout < 0:
		return usageErr("--timeout: must not be negative")
	case o.bin != "" && o.src != "":
		return usageErr("--bin and --src exclude each other")
	case o.noPreload && o.lib != "":
		return usageErr("--lib and --no-preload exclude each other")
	}
	if o.timeout == 0 {
		o.timeout = 10*time.Second + 2*o.duration
	}

	d := &demo{opt: o, env: env}
	var notes []string
	base := withoutShimPreload(env.Environ)
	d.kernelEnv = base
	if o.noPreload {
		d.shimEnv = mergeEnv(base, o.env)
	} else {
		lib, err := preloadPath(o.lib)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim demo: cannot run the sdpshim column: %v\n", err)
			fmt.Fprintln(env.Stderr, "sdpshim demo: build the interposer first (make), or pass --no-preload to run both columns on kernel TCP")
			return exitFailure
		}
		d.lib = lib
		d.shimEnv = withPreload(mergeEnv(base, o.env), lib)
		c, err := config.Load(d.shimEnv)
		d.shimRunDir = c.RunDir
		if err != nil {
			for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
				notes = append(notes, "warning: "+line+" (the shim disables itself: the sdpshim column runs on kernel TCP)")
			}
		}
		if _, set := lookupEnv(d.shimEnv, "SDPSHIM_CORE"); !set {
			core := filepath.Join(filepath.Dir(lib), "libsdpshim-core.so")
			if _, err := os.Stat(core); err != nil {
				notes = append(notes, fmt.Sprintf("warning: %s is missing: the interposer keeps every connection on kernel TCP (run make)", core))
			}
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	progs, cleanup, err := d.programs(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim demo: %v\n", err)
		return exitFailure
	}
	defer cleanup()
	d.progs = progs

	if !o.json {
		per := o.duration.Seconds()
		if o.count > 0 {
			per = 0.05
		}
		n := len(demoMeasures) * 2 * o.repeats
		fmt.Fprintf(env.Stderr, "sdpshim demo: %d runs, about %.0f s\n", n, float64(n)*(per+0.03)+0.5)
	}
	rep := d.measure(ctx)
	rep.Notes = append(notes, rep.Notes...)
	if ctx.Err() != nil {
		rep.Errors = append(rep.Errors, "interrupted")
	}
	if o.json {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim demo: %v\n", err)
			return exitFailure
		}
	} else {
		d.printTable(rep)
	}
	if len(rep.Errors) > 0 {
		return exitFailure
	}
	return exitOK
}

// demo holds one invocation's state.
type demo struct {
	opt                demoOptions
	env                *Env
	lib                string // "" with --no-preload
	kernelEnv, shimEnv []string
	shimRunDir         string            // where the shim column's processes serve their stats
	progs              map[string]string // test -> executable
	timeouts           map[string]int    // "mode test" -> runs past --timeout
	// kernelBytesErr is set when sock_diag is unusable; written by the one
	// sampler goroutine of a run, read after it has finished.
	kernelBytesErr error
}

// lookupEnv finds NAME in environ.
func lookupEnv(environ []string, name string) (string, bool) {
	for _, kv := range slices.Backward(environ) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// withoutShimPreload drops any libsdpshim.so from LD_PRELOAD, so that the
// kernel column runs without the shim even when the caller has it loaded.
func withoutShimPreload(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "LD_PRELOAD=")
		if !ok {
			out = append(out, kv)
			continue
		}
		var keep []string
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ':' }) {
			if filepath.Base(f) != "libsdpshim.so" {
				keep = append(keep, f)
			}
		}
		if len(keep) > 0 {
			out = append(out, "LD_PRELOAD="+strings.Join(keep, " "))
		}
	}
	return out
}

// programs returns the paths of the demo programs, building them when no
// --bin was given, and a cleanup function.
func (d *demo) programs(ctx context.Context) (map[string]string, func(), error) {
	names := []string{"pingpong", "stream"}
	progs := map[string]string{}
	if d.opt.bin != "" {
		for _, n := range names {
			p, err := filepath.Abs(filepath.Join(d.opt.bin, n))
			if err != nil {
				return nil, nil, err
			}
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
				return nil, nil, fmt.Errorf("--bin %s: no executable %s (build it with: gcc -O2 -Wall -Wextra -Werror -o %s demo/%s.c)", d.opt.bin, n, p, n)
			}
			progs[n] = p
		}
		return progs, func() {}, nil
	}
	src, err := d.sourceDir()
	if err != nil {
		return nil, nil, err
	}
	cc, _ := lookupEnv(d.env.Environ, "CC")
	if cc == "" {
		cc = "gcc"
	}
	ccPath, err := exec.LookPath(cc)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot build the demo programs: %s not found (install gcc, set CC, or pass --bin DIR)", cc)
	}
	dir, err := os.MkdirTemp("", "sdpshim-demo-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, n := range names {
		out := filepath.Join(dir, n)
		c := exec.CommandContext(bctx, ccPath, "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, filepath.Join(src, n+".c"))
		c.Env = d.kernelEnv
		if msg, err := c.CombinedOutput(); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("building %s: %v\n%s", filepath.Join(src, n+".c"), err, msg)
		}
		progs[n] = out
	}
	return progs, cleanup, nil
}

// sourceDir finds pingpong.c and stream.c: --src, ./demo, or ../demo
// beside this executable (build/sdpshim in a checkout).
func (d *demo) sourceDir() (string, error) {
	var tried []string
	try := func(dir string) bool {
		tried = append(tried, dir)
		for _, n := range []string{"pingpong.c", "stream.c"} {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return false
			}
		}
		return true
	}
	if d.opt.src != "" {
		if try(d.opt.src) {
			return d.opt.src, nil
		}
	} else {
		if try("demo") {
			return "demo", nil
		}
		if self, err := os.Executable(); err == nil {
			if dir := filepath.Join(filepath.Dir(self), "..", "demo"); try(dir) {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("cannot find pingpong.c and stream.c (looked in %s); run from the source tree, or pass --src DIR or --bin DIR",
		strings.Join(tried, ", "))
}

// measure runs every measurement in both modes, repeats times,
// alternating which mode goes first, and builds the report.
func (d *demo) measure(ctx context.Context) *demoReport {
	rep := &demoReport{}
	s := &rep.Settings
	s.Repeats, s.Count, s.Warmup, s.Env, s.Preload = d.opt.repeats, d.opt.count, d.opt.warmup, d.opt.env, d.lib
	if d.opt.count == 0 {
		s.DurationS = d.opt.duration.Seconds()
	}
	s.Env = append([]string{}, d.opt.env...)
	s.ShimColumn = "LD_PRELOAD=" + d.lib
	if d.opt.noPreload {
		s.ShimColumn = "stand-in without the interposer (--no-preload): kernel TCP"
	}
	d.timeouts = map[string]int{}
	skipped := map[string]int{}
	var skippedOrder []string
	for r := 0; r < d.opt.repeats; r++ {
		for _, m := range demoMeasures {
			modes := []string{modeKernel, modeShim}
			if r%2 == 1 {
				modes = []string{modeShim, modeKernel}
			}
			for _, mode := range modes {
				if ctx.Err() != nil {
					break
				}
				run := d.runOnce(ctx, m, mode, r)
				if key := mode + " " + m.Test; run.Error == errSkipped {
					if skipped[key] == 0 {
						skippedOrder = append(skippedOrder, key)
					}
					skipped[key]++
				} else if run.Error != "" {
					rep.Errors = append(rep.Errors, fmt.Sprintf("%s %s %d B, run %d: %s", mode, m.Test, m.Size, r+1, run.Error))
				}
				rep.Runs = append(rep.Runs, run)
			}
		}
	}
	for _, key := range skippedOrder {
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %d later run(s) skipped after two went past --timeout", key, skipped[key]))
	}
	if d.kernelBytesErr != nil {
		rep.Notes = append(rep.Notes, "kernel byte counters unavailable: "+d.kernelBytesErr.Error())
	}
	rep.Rows = d.rows(rep.Runs)
	rep.Transport = d.transportSummary(rep.Runs)
	return rep
}

// rows computes the medians of each row from the runs.
func (d *demo) rows(runs []demoRun) []demoRow {
	var rows []demoRow
	for _, spec := range demoRowSpecs {
		m := demoMeasures[spec.measure]
		row := demoRow{Name: spec.name, Label: spec.label, Unit: spec.unit, KernelRuns: []float64{}, ShimRuns: []float64{}}
		var kMsgs, sMsgs []float64
		var vias []string
		for _, run := range runs {
			if run.Test != m.Test || run.Size != m.Size || run.Error != "" {
				continue
			}
			v, ok := run.Values[spec.metric]
			if !ok {
				continue
			}
			msgs, hasMsgs := run.Values["msgs_per_s"]
			if run.Mode == modeKernel {
				row.KernelRuns = append(row.KernelRuns, v)
				if hasMsgs {
					kMsgs = append(kMsgs, msgs)
				}
			} else {
				row.ShimRuns = append(row.ShimRuns, v)
				if hasMsgs {
					sMsgs = append(sMsgs, msgs)
				}
				if run.Transport != nil {
					vias = append(vias, run.Transport.Via)
				}
			}
		}
		row.Kernel, row.Sdpshim = median(row.KernelRuns), median(row.ShimRuns)
		row.KernelMsgs, row.ShimMsgs = median(kMsgs), median(sMsgs)
		if row.Kernel != nil && row.Sdpshim != nil && *row.Kernel > 0 && *row.Sdpshim > 0 {
			r := *row.Kernel / *row.Sdpshim
			if spec.higherWins {
				r = 1 / r
			}
			row.Speedup = &r
		}
		row.Via = summariseVia(vias)
		for _, v := range [][]float64{row.KernelRuns, row.ShimRuns} {
			if len(v) > 1 && slices.Min(v) > 0 {
				r := slices.Max(v) / slices.Min(v)
				if row.Spread == nil || r > *row.Spread {
					row.Spread = &r
				}
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// median of v, nil when v is empty.
func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &m
}

// summariseVia turns the verdicts of a row's sdpshim runs into a word or
// two: the verdict when all agree, else the count of each.
func summariseVia(vias []string) string {
	if len(vias) == 0 {
		return "-"
	}
	counts := map[string]int{}
	for _, v := range vias {
		counts[v]++
	}
	if len(counts) == 1 {
		return vias[0]
	}
	var parts []string
	for _, v := range []string{viaAccelerated, viaKernel, viaMixed, viaUnknown} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	return strings.Join(parts, ", ")
}

// transportSummary says in a few lines what carried the sdpshim column,
// and checks the method on the kernel column.
func (d *demo) transportSummary(runs []demoRun) []string {
	var lines []string
	describe := func(mode string) (string, bool) {
		counts := map[string]int{}
		lo, hi := math.Inf(1), math.Inf(-1)
		n := 0
		for _, r := range runs {
			if r.Mode != mode || r.Transport == nil {
				continue
			}
			n++
			counts[r.Transport.Via]++
			if r.Transport.KernelShare != nil && r.Transport.Via != viaUnknown {
				lo, hi = min(lo, *r.Transport.KernelShare), max(hi, *r.Transport.KernelShare)
			}
		}
		if n == 0 {
			return "no completed runs", false
		}
		var parts []string
		for _, v := range []string{viaAccelerated, viaKernel, viaMixed, viaUnknown} {
			if counts[v] > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d of %d runs", v, counts[v], n))
			}
		}
		s := strings.Join(parts, ", ")
		if lo <= hi {
			s += fmt.Sprintf(" (kernel TCP carried %s of the payload)", shareRange(lo, hi))
		}
		return s, counts[viaKernel] == n
	}
	shim, _ := describe(modeShim)
	col := "sdpshim column"
	if d.opt.noPreload {
		col = "sdpshim column (stand-in, no preload)"
	}
	lines = append(lines, "transport by the kernel's byte counters (sock_diag), "+col+": "+shim)
	if kern, allKernel := describe(modeKernel); !allKernel {
		lines = append(lines, "kernel column, as a check of that method: "+kern)
	}
	shimSays := demoShimReportMissing
	for _, r := range runs {
		if r.Mode == modeShim && r.Transport != nil && r.Transport.Shim != "" {
			shimSays = "the shim's own report (last run): " + r.Transport.Shim
		}
	}
	return append(lines, shimSays)
}

func shareRange(lo, hi float64) string {
	f := func(x float64) string {
		if x >= 0.1 {
			return fmt.Sprintf("%.0f%%", 100*min(x, 1))
		}
		return fmt.Sprintf("%.2g%%", 100*x)
	}
	if f(lo) == f(hi) {
		return f(lo)
	}
	return f(lo) + " to " + f(hi)
}

// printTable writes the human-readable result.
func (d *demo) printTable(rep *demoReport) {
	w := d.env.Stdout
	what := fmt.Sprintf("%.3g s per run", d.opt.duration.Seconds())
	if d.opt.count > 0 {
		what = fmt.Sprintf("%d round trips / messages per run", d.opt.count)
	}
	fmt.Fprintf(w, "sdpshim demo: kernel TCP vs sdpshim over 127.0.0.1, median of %d runs per cell, modes alternated (%s)\n",
		d.opt.repeats, what)
	fmt.Fprintf(w, "sdpshim column: %s", rep.Settings.ShimColumn)
	if len(d.opt.env) > 0 {
		fmt.Fprintf(w, " %s", strings.Join(d.opt.env, " "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	cell := func(v, msgs *float64, unit string) string {
		if v == nil {
			return "error"
		}
		s := fmt.Sprintf("%.2f %s", *v, unit)
		if unit == "MB/s" {
			s = fmt.Sprintf("%.1f %s", *v, unit)
		}
		if msgs != nil {
			s += fmt.Sprintf(" (%s msg/s)", siCount(*msgs))
		}
		return s
	}
	const hdr = "%-28s  %24s  %24s  %8s  %s\n"
	fmt.Fprintf(w, hdr, "", "kernel TCP", "sdpshim", "speed-up", "sdpshim runs carried by")
	for _, r := range rep.Rows {
		ratio := "-"
		if r.Speedup != nil {
			ratio = fmt.Sprintf("%.2fx", *r.Speedup)
		}
		fmt.Fprintf(w, hdr, r.Label, cell(r.Kernel, r.KernelMsgs, r.Unit), cell(r.Sdpshim, r.ShimMsgs, r.Unit), ratio, r.Via)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "half RTT = round trip / 2; MB = 10^6 bytes; speed-up above 1 means sdpshim is faster")
	spread, spreadRow := 0.0, ""
	for _, r := range rep.Rows {
		if r.Spread != nil && *r.Spread > spread {
			spread, spreadRow = *r.Spread, r.Label
		}
	}
	if spread > 0 {
		fmt.Fprintf(w, "noise: runs within one cell differ by up to %.2fx (%s); lengthen with --duration and --repeats\n",
			spread, spreadRow)
	}
	for _, l := range rep.Transport {
		fmt.Fprintln(w, l)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, n)
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(w, "\n%d problem(s):\n", len(rep.Errors))
		for _, e := range rep.Errors {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimSpace(e), "\n", "\n    "))
		}
	}
}

// siCount writes n with a k/M suffix.
func siCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// runOnce runs the server and the client of measurement m in mode once.
func (d *demo) runOnce(ctx context.Context, m demoMeasure, mode string, repeat int) demoRun {
	run := demoRun{Test: m.Test, Size: m.Size, Mode: mode, Repeat: repeat}
	key := mode + " " + m.Test
	if d.timeouts[key] >= 2 {
		run.Error = errSkipped
		return run
	}
	environ := d.kernelEnv
	if mode == modeShim {
		environ = d.shimEnv
	}
	ctx, cancel := context.WithTimeout(ctx, d.opt.timeout)
	defer cancel()
	fail := func(err error) demoRun {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			d.timeouts[key]++
			err = fmt.Errorf("killed after --timeout %v: %w", d.opt.timeout, err)
		}
		run.Error = err.Error()
		return run
	}

	prog := d.progs[m.Test]
	server, err := startDemoChild(ctx, prog, []string{"server", "-a", "127.0.0.1", "-p", "0"}, environ)
	if err != nil {
		return fail(err)
	}
	defer server.kill()
	started := time.Now()
	var port int
	select {
	case line, ok := <-server.lines:
		if !ok {
			return fail(fmt.Errorf("server: %w", server.wait()))
		}
		v, err := parseResult(line)
		if err != nil || v["port"] < 1 || v["port"] > 65535 {
			return fail(fmt.Errorf("server: expected its listening line, got %q", line))
		}
		port = int(v["port"])
	case <-ctx.Done():
		return fail(fmt.Errorf("server did not start listening: %w", ctx.Err()))
	}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	samples := make(chan demoSamples, 1)
	go func() { samples <- d.sample(sampleCtx, port, server.cmd.Process.Pid) }()
	finish := func() demoSamples {
		stopSampling()
		return <-samples
	}

	cargs := []string{"client", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-s", strconv.Itoa(m.Size)}
	if m.Test == "pingpong" {
		cargs = append(cargs, "-w", strconv.Itoa(d.opt.warmup))
	}
	if d.opt.count > 0 {
		cargs = append(cargs, "-n", strconv.Itoa(d.opt.count))
	} else {
		cargs = append(cargs, "-t", strconv.FormatFloat(d.opt.duration.Seconds(), 'f', -1, 64))
	}
	client, err := startDemoChild(ctx, prog, cargs, environ)
	if err != nil {
		finish()
		return fail(err)
	}
	defer client.kill()
	clientLines, clientErr := client.collect()
	if clientErr != nil {
		finish()
		return fail(fmt.Errorf("client: %w", clientErr))
	}
	serverLines, serverErr := server.collect()
	ended := time.Now()
	smp := finish()
	if serverErr != nil {
		return fail(fmt.Errorf("server: %w", serverErr))
	}
	clientRes, err := lastResult(clientLines, "client")
	if err != nil {
		return fail(err)
	}
	serverRes, err := lastResult(serverLines, "server")
	if err != nil {
		return fail(err)
	}
	run.Values = clientRes
	if m.Test == "stream" {
		run.Values = serverRes // the receiver's view of the throughput
	}
	for k, v := range run.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fail(fmt.Errorf("result %s = %v is not a sane number", k, v))
		}
	}
	run.Transport = d.judge(smp, uint64(serverRes["bytes"]), started, ended)
	return run
}

// demoSamples is what sampling a connection found.
type demoSamples struct {
	n         int       // samples that saw the connection
	maxBytes  uint64    // largest tcpi_bytes_received
	last      time.Time // time of the last sample that saw it
	shim      demoShimAnswer
	shimKnown bool
}

// sample polls the kernel's byte counters of the server's socket on port,
// and the shim's own report, until ctx ends.
func (d *demo) sample(ctx context.Context, port, pid int) demoSamples {
	var s demoSamples
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastShim time.Time
	for {
		if d.kernelBytesErr == nil {
			b, found, err := kernelBytesReceived(port)
			switch {
			case err != nil:
				d.kernelBytesErr = err
			case found:
				s.n++
				s.maxBytes = max(s.maxBytes, b)
				s.last = time.Now()
			}
		}
		if time.Since(lastShim) >= 100*time.Millisecond {
			lastShim = time.Now()
			if a := demoShimReport(d.shimRunDir, pid, port); a.Known {
				s.shim, s.shimKnown = a, true
			}
		}
		select {
		case <-ctx.Done():
			return s
		case <-tick.C:
		}
	}
}

// judge turns the samples of a run into a verdict. The kernel's counter
// is only trusted when a sample saw the connection late in the run: a
// share measured early could not tell a fallback that starts later.
func (d *demo) judge(s demoSamples, appBytes uint64, started, ended time.Time) *demoTransport {
	t := &demoTransport{Via: viaUnknown, KernelBytes: s.maxBytes, AppBytes: appBytes, Samples: s.n}
	if s.shimKnown {
		t.Shim = s.shim.Detail
		if t.Shim == "" {
			t.Shim = map[bool]string{true: "accelerated", false: "not accelerated"}[s.shim.Accelerated]
		}
	}
	total := ended.Sub(started)
	if s.n > 0 && total > 0 {
		t.Coverage = float64(s.last.Sub(started)) / float64(total)
	}
	switch {
	case d.kernelBytesErr != nil:
		t.Why = "kernel byte counters unavailable: " + d.kernelBytesErr.Error()
	case s.n == 0:
		t.Why = "the connection was never sampled (run too short)"
	case appBytes == 0:
		t.Why = "the server read no bytes"
	default:
		share := float64(s.maxBytes) / float64(appBytes)
		t.KernelShare = &share
		switch {
		case share >= 0.5:
			// Whatever was sampled already went through the kernel.
			t.Via = viaKernel
		case s.n < 3 || t.Coverage < 0.8:
			t.Why = fmt.Sprintf("last sample at %.0f%% of the run: too early to rule out kernel TCP", 100*t.Coverage)
		case share < 0.05:
			t.Via = viaAccelerated
		default:
			t.Via = viaMixed
		}
		if t.Why == "" {
			t.Why = fmt.Sprintf("kernel TCP carried %d of %d payload bytes (%.1f%%, %d samples)",
				s.maxBytes, appBytes, 100*share, s.n)
		}
	}
	// The shim's own answer, when it has one, is the verdict; the kernel's
	// counters stay in the record to cross-check it.
	if s.shimKnown {
		shim := viaKernel
		if s.shim.Accelerated {
			shim = viaAccelerated
		}
		if t.Via != viaUnknown && t.Via != shim {
			t.Why += "; the shim reports " + t.Shim
		}
		t.Via = shim
	}
	return t
}

// parseResult decodes one JSON result line into its numeric fields.
func parseResult(line string) (map[string]float64, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range raw {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out, nil
}

// lastResult finds the result line among a program's output lines.
func lastResult(lines []string, who string) (map[string]float64, error) {
	for _, l := range slices.Backward(lines) {
		if strings.Contains(l, `"role":"`+who+`"`) {
			v, err := parseResult(l)
			if err != nil {
				return nil, fmt.Errorf("%s: bad result line %q: %v", who, l, err)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s printed no result line (output %q)", who, lines)
}

// demoChild is a running demo program in its own process group.
type demoChild struct {
	cmd    *exec.Cmd
	lines  chan string // stdout lines; closed at EOF
	stderr *cappedBuffer
	done   chan error // Wait's result, once
	exited atomic.Bool
	err    error
	waited bool
	ctx    context.Context
}

func startDemoChild(ctx context.Context, path string, args, environ []string) (*demoChild, error) {
	c := exec.CommandContext(ctx, path, args...)
	c.Env = environ
	// Own process group, so that killing it leaves nothing behind; and
	// killed with us should we die first.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 2 * time.Second
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	ch := &demoChild{cmd: c, lines: make(chan string, 64), stderr: &cappedBuffer{max: 4096}, done: make(chan error, 1), ctx: ctx}
	c.Stderr = ch.stderr
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(path), err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 4096), 1<<20)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		close(ch.lines)
		err := c.Wait()
		ch.exited.Store(true)
		ch.done <- err
	}()
	return ch, nil
}

// wait waits for the child to exit and describes how it did.
func (c *demoChild) wait() error {
	if !c.waited {
		c.waited = true
		err := <-c.done
		if err != nil {
			msg := strings.TrimSpace(c.stderr.String())
			if c.ctx.Err() != nil {
				err = fmt.Errorf("%v (%v)", err, c.ctx.Err())
			}
			if msg != "" {
				err = fmt.Errorf("%v: %s", err, msg)
			}
		}
		c.err = err
	}
	return c.err
}

// collect reads the rest of the child's output and waits for it.
func (c *demoChild) collect() ([]string, error) {
	var lines []string
	for l := range c.lines {
		lines = append(lines, l)
	}
	return lines, c.wait()
}

// kill ends the child's process group unless it has already exited.
func (c *demoChild) kill() {
	if !c.exited.Load() {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	go func() {
		for range c.lines {
		}
	}()
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// inet_diag constants (linux/inet_diag.h).
const (
	inetDiagInfo   = 2  // INET_DIAG_INFO attribute: struct tcp_info
	inetDiagReqLen = 56 // struct inet_diag_req_v2
	inetDiagMsgLen = 72 // struct inet_diag_msg
)

// kernelBytesReceived asks the kernel (sock_diag; no privileges needed for
// one's own sockets) for the IPv4 TCP socket whose local port is port,
// listeners and TIME_WAIT left out, and returns its tcpi_bytes_received:
// the payload bytes that arrived on it over kernel TCP.
func kernelBytesReceived(port int) (bytes uint64, found bool, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, false, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, false, err
	}
	ne := binary.NativeEndian
	req := make([]byte, unix.NLMSG_HDRLEN+inetDiagReqLen)
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1)
	b := req[unix.NLMSG_HDRLEN:]
	b[0], b[1], b[2] = unix.AF_INET, unix.IPPROTO_TCP, 1<<(inetDiagInfo-1)
	const tcpTimeWait, tcpListen = 6, 10
	ne.PutUint32(b[4:], 0xfff&^(1<<tcpTimeWait|1<<tcpListen))
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, false, fmt.Errorf("sock_diag request: %w", err)
	}
	off := int(unsafe.Offsetof(unix.TCPInfo{}.Bytes_received))
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("sock_diag reply: %w", err)
		}
		for msg := buf[:n]; len(msg) >= unix.NLMSG_HDRLEN; {
			l := int(ne.Uint32(msg[0:]))
			typ := ne.Uint16(msg[4:])
			if l < unix.NLMSG_HDRLEN || l > len(msg) {
				return 0, false, errors.New("sock_diag: malformed reply")
			}
			data := msg[unix.NLMSG_HDRLEN:l]
			msg = msg[min(len(msg), (l+3)&^3):]
			switch typ {
			case unix.NLMSG_DONE:
				return bytes, found, nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if e := int32(ne.Uint32(data)); e < 0 {
						return 0, false, fmt.Errorf("sock_diag: %w", unix.Errno(-e))
					}
				}
				continue
			}
			if len(data) < inetDiagMsgLen || int(binary.BigEndian.Uint16(data[4:])) != port {
				continue
			}
			for a := data[inetDiagMsgLen:]; len(a) >= 4; {
				al, at := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
				if al < 4 || al > len(a) {
					break
				}
				if at == inetDiagInfo && al-4 >= off+8 {
					found = true
					bytes = max(bytes, ne.Uint64(a[4+off:]))
				}
				a = a[min(len(a), (al+3)&^3):]
			}
		}
	}
}
