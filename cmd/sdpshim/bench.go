package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
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
	// Run measures and writes the section's tables to env.Stdout. quick
	// asks for fewer repeats and shorter runs (a smoke run, e.g. in a
	// test); the figures are then only indicative. It returns a non-nil
	// error when the section could not measure (a missing program, a
	// failed transfer), never because a target was missed: targets are
	// reported, not enforced.
	Run func(env *Env, quick bool) error
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
		Usage:   "sdpshim bench [--quick] [SECTION...]",
		Help: `Runs each benchmark section (all of them when none is named) and prints
its table. Every ratio compares figures measured in the same run; the
machine is shared, so each figure is the median of repeats.

  --quick   fewer repeats and shorter runs (smoke test; figures indicative)

Sections are listed by 'sdpshim bench --list'.`,
		Run: runBench,
	})
}

// runBench implements `sdpshim bench`.
func runBench(env *Env, args []string) int {
	cmd := commands["bench"]
	fs := cmd.flags(env)
	quick := fs.Bool("quick", false, "fewer repeats and shorter runs")
	list := fs.Bool("list", false, "list the sections")
	if code, done := parse(fs, args); done {
		return code
	}
	all := sortedBenchSections()
	if *list {
		for _, s := range all {
			fmt.Fprintf(env.Stdout, "%-12s %s\n", s.Name, s.Summary)
		}
		return exitOK
	}
	run := all
	if fs.NArg() > 0 {
		run = nil
		for _, name := range fs.Args() {
			s, ok := benchSections[name]
			if !ok {
				fmt.Fprintf(env.Stderr, "sdpshim bench: no section %q (have: %s)\n", name, benchNames(all))
				return exitUsage
			}
			run = append(run, s)
		}
	}
	code := exitOK
	for _, s := range run {
		fmt.Fprintf(env.Stdout, "== %s: %s\n", s.Name, s.Summary)
		start := time.Now()
		if err := s.Run(env, *quick); err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim bench %s: %v\n", s.Name, err)
			code = exitFailure
		}
		fmt.Fprintf(env.Stdout, "(%s: %.1f s)\n\n", s.Name, time.Since(start).Seconds())
	}
	return code
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
