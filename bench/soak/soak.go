package soak

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/shim/config"
)

// The run's shape. One client process runs for the whole duration,
// longParallel connections at a time; shortLanes lanes start short-lived
// client processes one after another, each running 1 to shortConns
// connections, shortParallel at a time, and exiting.
const (
	longParallel  = 4
	shortLanes    = 2
	shortConns    = 8
	shortParallel = 2
	// stall is how long a connection may move nothing before it is a hang.
	stall = 10 * time.Second
	// exitLimit is how long a client process may run past its seconds
	// (its connections' ends, a hung one's stall and its stuck wait)
	// before it is killed as a hang.
	exitLimit = 3*stall + 30*time.Second
	// fdSlack is how many more fds than at the start the server may
	// hold at the end.
	fdSlack = 4
	// seed is the first seed; the columns use the same ones.
	seed = 1
)

// Defaults of Config.Duration.
const (
	DefaultDuration = time.Minute
	QuickDuration   = 10 * time.Second
)

// Config is one soak.
type Config struct {
	// Lib is libsdpshim.so (libsdpshim-core.so beside it).
	Lib string
	// Environ is the environment the programs start from. Kernel TCP's
	// column drops its LD_PRELOAD and SDPSHIM_* variables; the shim's
	// keeps the shim's settings among them (so a soak can run in any
	// mode) but SDPSHIM_RUNDIR, which is private to the run.
	Environ []string
	// Duration is how long each column runs; 0: DefaultDuration, or
	// QuickDuration with Quick.
	Duration time.Duration
	// Quick shortens the default duration (a smoke run).
	Quick bool
	// PreFork runs the server as a pre-fork server does its listener:
	// shared with a fork child (which only holds it), so that the shim
	// defers every connection until the server uses it (shim/deferred.go).
	PreFork bool
	// Out receives the table; Log progress lines (may be io.Discard).
	Out, Log io.Writer
	// Rec records the figures; nil records nothing.
	Rec *results.Recorder
}

// Run soaks over kernel TCP, then under the shim, for the duration each,
// writes the table and records the figures. The error is non-nil when a
// column could not run or found a problem: a mismatch, a hang, an error,
// a fallback.
func Run(cfg Config) error {
	d := cfg.Duration
	if d <= 0 {
		d = DefaultDuration
		if cfg.Quick {
			d = QuickDuration
		}
	}
	tmp, err := os.MkdirTemp("", "sdpshim-bench-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prog, err := build(tmp)
	if err != nil {
		return err
	}
	h := &harness{prog: prog, lib: cfg.Lib, tmp: tmp, d: d, log: cfg.Log, prefork: cfg.PreFork}
	h.split(cfg.Environ)
	cols := []*column{h.column("kernel TCP", false), h.column("sdpshim", true)}
	if cfg.PreFork {
		fmt.Fprintln(cfg.Out, "soak: a pre-fork server (its listener shared with a fork child): the shim defers every connection")
	}
	writeTable(cfg.Out, d, cols)
	record(cfg.Rec, d, cols)
	var errs []error
	for _, c := range cols {
		switch {
		case c.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", c.name, c.err))
		case !c.clean():
			errs = append(errs, fmt.Errorf("%s: %s", c.name, c.problems()))
		}
	}
	return errors.Join(errs...)
}

// harness runs the soak program.
type harness struct {
	prog, lib, tmp string
	base           []string // the environment without the shim's settings
	settings       []string // the SDPSHIM_* settings given, for the shim's column
	d              time.Duration
	log            io.Writer
	prefork        bool // Config.PreFork
}

// interval is the sampling interval of a run of d: a hundredth of it,
// at least 250 ms.
func interval(d time.Duration) time.Duration { return max(d/100, 250*time.Millisecond) }

// split sorts environ into the base environment and the shim's settings
// (Config.Environ).
func (h *harness) split(environ []string) {
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		_, knob := config.LookupKnob(name)
		switch {
		case name == "SDPSHIM_RUNDIR" || name == "LD_PRELOAD":
		case knob:
			h.settings = append(h.settings, kv)
		case !strings.HasPrefix(name, "SDPSHIM_"):
			h.base = append(h.base, kv)
		}
	}
}

// environ is the programs' environment in one column (never nil: exec
// gives a nil environment this process's own).
func (h *harness) environ(shim bool, rd string) []string {
	out := append([]string{}, h.base...)
	if shim {
		out = append(out, h.settings...)
		if _, set := config.Getenv(h.settings, "SDPSHIM_SHORT_CONN"); !set {
			// Every connection takes the accelerated path: the soak is
			// of the transport, and the short-lived policy
			// (shim/shortconn.go) keeps some on kernel TCP by design.
			out = append(out, "SDPSHIM_SHORT_CONN=0")
		}
		if _, set := config.Getenv(h.settings, "SDPSHIM_LOG_LEVEL"); !set {
			// Each fallback's reason and error, from the server and
			// the clients alike, on stderr: the column's notes.
			out = append(out, "SDPSHIM_LOG_LEVEL=warn")
		}
		out = append(out, "LD_PRELOAD="+h.lib, "SDPSHIM_RUNDIR="+rd)
	}
	return out
}
