package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
)

// BenchSection is one group of benchmarks that `sdpshim bench` runs and
// prints as a table next to its baseline (kernel TCP or the paper's
// figures), every figure measured in the same run.
type BenchSection struct {
	// Name selects the section on the command line.
	Name string
	// Order sorts the sections when all of them run (lower first).
	Order int
	// Summary is one line for `sdpshim help bench`.
	Summary string
	// Run measures, writes the section's tables to out and records
	// every figure in rec (which may be nil). quick
	// asks for fewer repeats and shorter runs (a smoke run, e.g. in a
	// test); the figures are then only indicative. It returns a non-nil
	// error when the section could not measure (a missing program, a
	// failed transfer), never because a target was missed: targets are
	// reported, not enforced.
	Run func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error
	// Plots are the pictures `sdpshim bench --out` draws of the
	// section's figures.
	Plots []results.Plot
	// OnlyNamed keeps the section out of a run that names no section
	// (the soak: long, and about correctness, not speed).
	OnlyNamed bool
	// Flags, when set, adds the section's own flags to those of
	// `sdpshim bench`; Run reads their values.
	Flags func(fs *flag.FlagSet)
}

// benchSections holds every registered section by name.
var benchSections = map[string]*BenchSection{}

// registerBench adds s; called from init functions.
func registerBench(s *BenchSection) {
	if s.Name == "" || s.Run == nil {
		panic("sdpshim: incomplete bench section " + s.Name)
	}
	if _, dup := benchSections[s.Name]; dup {
		panic("sdpshim: bench section registered twice: " + s.Name)
	}
	benchSections[s.Name] = s
}

func init() {
	register(&Command{
		Name:    "bench",
		Summary: "run the benchmarks: sdpshim against kernel TCP and the papers' figures",
		Usage:   "sdpshim bench [--quick] [--out DIR] [--json] [--duration D] [SECTION...] | --compare OLD.json NEW.json | --from FILE --out DIR",
		Help: `Runs each benchmark section (all of them when none is named) and prints
its table. Every ratio compares figures measured in the same run; the
machine is shared, so each figure is the median of repeats.

  --quick     fewer repeats and shorter runs (smoke test; figures indicative)
  --out DIR   also write DIR/results.json (every figure with its repeats,
              median, paper value and target; the machine, build and
              settings) and one PNG per figure group, DIR/SECTION-GROUP.png
  --json      print the results as JSON on stdout (the tables go to stderr)
  --duration D
              soak: how long each column runs (default 1m; 10s with
              --quick)
  --from FILE --out DIR
              measure nothing: draw the plots of a results.json again in DIR
  --compare OLD.json NEW.json
              print each figure's change between two results files and
              whether it exceeds the noise: a change counts when the
              medians differ by more than the larger spread of the two
              runs' repeats (their range, or their interquartile range
              from five repeats on) and by more than 1%; otherwise it is
              "noise"

Flags may follow the section names. Sections are listed by 'sdpshim
bench --list'; those marked "(named only)" run only when named, e.g.
'sdpshim bench soak --duration 10m'.`,
		Run: runBench,
	})
}

// runBench implements `sdpshim bench`.
func runBench(env *Env, args []string) int {
	cmd := commands["bench"]
	fs := cmd.flags(env)
	quick := fs.Bool("quick", false, "fewer repeats and shorter runs")
	list := fs.Bool("list", false, "list the sections")
	outDir := fs.String("out", "", "write results.json and the plots to this directory")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	compare := fs.Bool("compare", false, "compare two results files")
	from := fs.String("from", "", "draw the plots of this results file instead of measuring")
	all := sortedBenchSections()
	for _, s := range all {
		if s.Flags != nil {
			s.Flags(fs)
		}
	}
	names, code, done := parseInterspersed(fs, args)
	if done {
		return code
	}
	if *compare {
		return compareBench(env, names)
	}
	if *from != "" {
		return replotBench(env, *from, *outDir)
	}
	if *list {
		for _, s := range all {
			only := ""
			if s.OnlyNamed {
				only = " (named only)"
			}
			fmt.Fprintf(env.Stdout, "%-12s %s%s\n", s.Name, s.Summary, only)
		}
		return exitOK
	}
	var run []*BenchSection
	for _, s := range all {
		if !s.OnlyNamed {
			run = append(run, s)
		}
	}
	if len(names) > 0 {
		run = nil
		for _, name := range names {
			s, ok := benchSections[name]
			if !ok {
				fmt.Fprintf(env.Stderr, "sdpshim bench: no section %q (have: %s)\n", name, benchNames(all))
				return exitUsage
			}
			run = append(run, s)
		}
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
			return exitFailure
		}
	}
	tables := env.Stdout
	if *asJSON {
		tables = env.Stderr
	}
	res := newBenchRun(env, *quick, names)
	code = exitOK
	for _, s := range run {
		fmt.Fprintf(tables, "== %s: %s\n", s.Name, s.Summary)
		start := time.Now()
		rec := results.NewRecorder(s.Name)
		sr := results.SectionRun{Name: s.Name}
		if err := s.Run(env, tables, *quick, rec); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim bench %s: %v\n", s.Name, err)
			sr.Error = err.Error()
			code = exitFailure
		}
		sr.Seconds = time.Since(start).Seconds()
		res.Add(sr, rec)
		fmt.Fprintf(tables, "(%s: %.1f s)\n\n", s.Name, sr.Seconds)
	}
	if *outDir != "" && !writeBenchOut(env, tables, res, *outDir) {
		code = exitFailure
	}
	if *asJSON {
		if err := res.Encode(env.Stdout); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
			code = exitFailure
		}
	}
	return code
}

// parseInterspersed parses args into fs, flags before, between and after
// the other arguments, and returns those (the section names, or the
// files of --compare). done is parse's.
func parseInterspersed(fs *flag.FlagSet, args []string) (rest []string, code int, done bool) {
	for {
		if code, done = parse(fs, args); done {
			return nil, code, true
		}
		if fs.NArg() == 0 {
			return rest, exitOK, false
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func sortedBenchSections() []*BenchSection {
	all := make([]*BenchSection, 0, len(benchSections))
	for _, s := range benchSections {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Order != all[j].Order {
			return all[i].Order < all[j].Order
		}
		return all[i].Name < all[j].Name
	})
	return all
}

func benchNames(all []*BenchSection) string {
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// benchProgress is where a section that runs programs writes its progress
// lines: env's standard error when SDPSHIM_BENCH_VERBOSE is set, else
// nowhere.
func benchProgress(env *Env) io.Writer {
	if os.Getenv("SDPSHIM_BENCH_VERBOSE") != "" {
		return env.Stderr
	}
	return io.Discard
}
