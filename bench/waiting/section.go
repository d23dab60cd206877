package waiting

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/core/wait"
)

// Modes are the wait modes compared, the baselines first.
var Modes = []string{wait.WaitModeBusy, wait.WaitModeEvent, wait.WaitModeHybrid, wait.WaitModeAdaptive}

// Settings size a run of the section.
type Settings struct {
	Repeats  int           // runs per cell, each a fresh pair of processes
	Duration time.Duration // of each shape run
	Idle     time.Duration // of each idle run
}

// Full and Quick are the settings of `sdpshim bench waiting` without and
// with --quick: about 3 minutes, and under 15 s.
var (
	Full  = Settings{Repeats: 5, Duration: 1500 * time.Millisecond, Idle: 10 * time.Second}
	Quick = Settings{Repeats: 1, Duration: 400 * time.Millisecond, Idle: 500 * time.Millisecond}
)

// Run measures every mode on every shape and an idle connection per mode
// with the Full or Quick settings, prints the table and the targets to w
// and records every figure in rec (figures.go; rec may be nil). It returns an error when a measurement failed (the table then
// shows what was measured); a missed target is reported, not an error.
func Run(w io.Writer, quick bool, rec *results.Recorder) error {
	s := Full
	if quick {
		s = Quick
	}
	return RunWith(w, s, rec)
}

// RunWith is Run with explicit settings. The repeats are interleaved
// (every cell once, then every cell again, the order of the modes turned
// each time), so that a change in the shared machine's load spreads over
// all the modes.
func RunWith(w io.Writer, s Settings, rec *results.Recorder) error {
	var errs []error
	runs := map[[2]string][]measurement{}
	seed := uint64(1)
	for r := range s.Repeats {
		for _, sh := range Shapes {
			for i := range Modes {
				mode := Modes[(i+r)%len(Modes)]
				seed++
				m, err := measure(mode, sh, s.Duration, seed)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s, %s: %w", sh.Name, mode, err))
					continue
				}
				k := [2]string{sh.Name, mode}
				runs[k] = append(runs[k], m)
			}
		}
	}
	var cells []Cell
	for _, sh := range Shapes {
		for _, mode := range Modes {
			if ms := runs[[2]string{sh.Name, mode}]; len(ms) > 0 {
				cells = append(cells, summarize(mode, sh.Name, ms))
			}
		}
	}
	var idle []IdleCell
	for _, mode := range Modes {
		m, err := measureIdle(mode, s.Idle)
		if err != nil {
			errs = append(errs, fmt.Errorf("idle, %s: %w", mode, err))
			continue
		}
		idle = append(idle, summarizeIdle(mode, []measurement{m}))
	}
	WriteTable(w, cells, idle, s.Repeats, s.Duration)
	record(rec, cells, idle)
	return errors.Join(errs...)
}
