package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/bench/plots"
	"github.com/sdpshim/sdpshim/bench/results"
)

// newBenchRun starts the results of a run: the machine, the build and
// the settings.
func newBenchRun(env *Env, quick bool, sections []string) *results.Run {
	r := &results.Run{Date: time.Now(), Machine: results.ThisMachine(),
		Settings: results.Settings{Quick: quick, Sections: sections, GOMAXPROCS: runtime.GOMAXPROCS(0)}}
	r.Version, r.Commit = results.Build()
	for _, kv := range env.Environ {
		if name, value, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "SDPSHIM_") {
			if r.Settings.Env == nil {
				r.Settings.Env = map[string]string{}
			}
			r.Settings.Env[name] = value
		}
	}
	return r
}

// writeBenchOut writes dir/results.json and the plots of every section
// run, and lists the files on w; false when something could not be
// written (said on stderr).
func writeBenchOut(env *Env, w io.Writer, res *results.Run, dir string) bool {
	path := filepath.Join(dir, "results.json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
		return false
	}
	if err := res.WriteFile(path); err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
		return false
	}
	byName := map[string][]results.Plot{}
	for name, s := range benchSections {
		byName[name] = s.Plots
	}
	files, err := plots.Save(res, byName, dir)
	fmt.Fprintf(w, "wrote %s\n", path)
	for _, f := range files {
		fmt.Fprintf(w, "wrote %s\n", f)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
		return false
	}
	return true
}

// replotBench implements `sdpshim bench --from FILE --out DIR`: the
// plots of a results file drawn again (and the file copied to DIR).
func replotBench(env *Env, from, dir string) int {
	if dir == "" {
		fmt.Fprintln(env.Stderr, "sdpshim bench: --from needs --out DIR")
		return exitUsage
	}
	res, err := results.Read(from)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
		return exitFailure
	}
	if !writeBenchOut(env, env.Stdout, res, dir) {
		return exitFailure
	}
	return exitOK
}

// compareBench implements `sdpshim bench --compare OLD.json NEW.json`.
func compareBench(env *Env, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(env.Stderr, "usage: sdpshim bench --compare OLD.json NEW.json")
		return exitUsage
	}
	var runs [2]*results.Run
	for i, path := range args {
		r, err := results.Read(path)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sdpshim bench: %v\n", err)
			return exitFailure
		}
		runs[i] = r
	}
	for i, r := range runs {
		fmt.Fprintf(env.Stdout, "%s: %s, %s, commit %s%s\n", []string{"old", "new"}[i], r.Date.Format(time.DateTime), r.Machine, r.Commit, quickNote(r))
	}
	fmt.Fprintln(env.Stdout, "verdict: better/worse when the medians differ by more than the larger spread of the two runs' repeats (range; IQR from 5 repeats) and by more than 1%, else noise")
	fmt.Fprintln(env.Stdout)
	if err := results.WriteChanges(env.Stdout, results.Compare(runs[0], runs[1])); err != nil {
		return exitFailure
	}
	return exitOK
}

func quickNote(r *results.Run) string {
	if r.Settings.Quick {
		return " (--quick)"
	}
	return ""
}
