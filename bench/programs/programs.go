package programs

import (
	"embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/freeport"
	"github.com/sdpshim/sdpshim/bench/results"
)

//go:embed csrc/*.c csrc/*.h
var csrc embed.FS

// Config is one run of the programs benchmark.
type Config struct {
	// Lib is libsdpshim.so (libsdpshim-core.so beside it).
	Lib string
	// Environ is the environment the programs start from.
	Environ []string
	// Quick takes one short repeat of each figure (a smoke run).
	Quick bool
	// Out receives the table; Log progress lines (may be io.Discard).
	Out, Log io.Writer
	// Rec records every figure (figures.go); nil records nothing.
	Rec *results.Recorder
	// Only, when not empty, names the measures to take (as listed in
	// the table's notes: "redis", "message costs", ...); nil takes all.
	Only []string
}

// harness is the state of one run.
type harness struct {
	env     *env
	quick   bool
	built   map[string]string
	pgCred  *syscall.Credential
	pgDir   string
	pgData  string
	pgReady bool
	podTurn int // pods: which placement goes first
}

func (h *harness) seconds() int {
	if h.quick {
		return 1
	}
	return 3
}

// pair returns a run directory and a free port for one measurement.
func (h *harness) pair() (string, int, error) { return h.pairAs(nil) }

// pairAs is pair for programs running with cred (the run directory is
// theirs).
func (h *harness) pairAs(cred *syscall.Credential) (string, int, error) {
	rd, err := h.env.runDir()
	if err != nil {
		return "", 0, err
	}
	if cred != nil {
		d := filepath.Dir(rd)
		os.Chmod(h.env.tmp, 0o755)
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", 0, err
		}
	}
	port, err := freeport.Loopback()
	return rd, port, err
}

// Run measures every program in both modes, repeats times each
// (alternating which mode goes first), and writes the table. Programs
// that are missing are reported and skipped; a measurement that fails is
// shown as failed with its reason. The error is non-nil only when nothing
// could be measured.
func Run(cfg Config) error {
	tmp, err := os.MkdirTemp("", "sdpshim-bench-programs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	h := &harness{env: newEnv(cfg.Environ, cfg.Lib, tmp), quick: cfg.Quick, built: map[string]string{}}
	repeats := 3
	if cfg.Quick {
		repeats = 1
	}
	all := append([]measure{
		{"passthrough", []string{"gcc"}, (*harness).passthrough},
		{"startup", nil, (*harness).startup},
	}, measures...)
	vals := map[string][2][]float64{}
	var notes []string
	for _, ms := range all {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, ms.name) {
			continue
		}
		if missing := missingTools(ms.needs); missing != "" {
			notes = append(notes, fmt.Sprintf("%s: not measured, %s not installed", ms.name, missing))
			continue
		}
		failed := map[string]bool{}
		for r := 0; r < repeats; r++ {
			order := []mode{kernel, shimmed}
			if r%2 == 1 {
				order = []mode{shimmed, kernel}
			}
			for _, m := range order {
				t0 := time.Now()
				got, err := ms.run(h, m)
				fmt.Fprintf(cfg.Log, "programs: %s, %s, repeat %d/%d: %.1f s\n", ms.name, m, r+1, repeats, time.Since(t0).Seconds())
				if err != nil {
					msg := fmt.Sprintf("%s (%s): %s", ms.name, m, brief(err.Error()))
					if !failed[msg] {
						failed[msg] = true
						notes = append(notes, msg)
					}
				}
				for k, v := range got {
					x := vals[k]
					x[m] = append(x[m], v)
					vals[k] = x
				}
			}
		}
	}
	writeTable(cfg.Out, vals, repeats)
	record(cfg.Rec, vals)
	podVersus(cfg.Out, cfg.Rec, vals)
	cameraVersus(cfg.Out, cfg.Rec, vals)
	for _, n := range notes {
		fmt.Fprintln(cfg.Out, "note:", n)
	}
	if len(vals) == 0 {
		return fmt.Errorf("nothing measured")
	}
	return nil
}

func missingTools(tools []string) string {
	var miss []string
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			miss = append(miss, t)
		}
	}
	return strings.Join(miss, ", ")
}

// median of v (NaN-free); ok false for none.
func median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

func writeTable(w io.Writer, vals map[string][2][]float64, repeats int) {
	fmt.Fprintf(w, "kernel TCP vs sdpshim, same run, median of %d repeat(s) each\n", repeats)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tunit\tkernel\tsdpshim\tratio\ttarget\tmet\t")
	for _, r := range rows {
		x, ok := vals[r.key]
		if !ok {
			continue
		}
		k, kok := median(x[kernel])
		s, sok := median(x[shimmed])
		cell := func(v float64, ok bool) string {
			if !ok && r.absolute && len(x[kernel]) == 0 {
				return "-" // a figure of sdpshim's alone
			}
			if !ok {
				return "failed"
			}
			return r.format(v)
		}
		ratio, target, met := "", r.targetText(), ""
		if kok && sok && k > 0 && s > 0 {
			ratio = fmt.Sprintf("%.2fx", r.ratio(k, s))
		}
		if r.judge != nil && sok && (kok || r.absolute) {
			met = map[bool]string{true: "yes", false: "NO"}[r.judge(k, s)]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.label, r.unit, cell(k, kok), cell(s, sok), ratio, target, met)
	}
	tw.Flush()
	fmt.Fprintln(w, "ratio: sdpshim's advantage (throughput: sdpshim/kernel; latency and cost: kernel/sdpshim)")
}

// brief is an error's first lines, for a note under the table.
func brief(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 6 {
		lines = lines[:6]
	}
	return strings.Join(lines, "\n      ")
}
