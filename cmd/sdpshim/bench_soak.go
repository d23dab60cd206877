package main

import (
	"flag"
	"io"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/bench/soak"
)

// soakDuration and soakPreFork are the soak section's --duration and
// --prefork.
var (
	soakDuration time.Duration
	soakPreFork  bool
)

// The soak section: a checksummed soak of one long-running server and
// client processes that come and go (csrc/soak.c in bench/soak), over
// kernel TCP and under the preload for the same time each. It runs only
// when named: `sdpshim bench soak --duration 10m`.
func init() {
	registerBench(&BenchSection{
		Name:      "soak",
		Order:     90,
		OnlyNamed: true,
		Summary:   "checksummed soak (--duration, default 1m per column): mismatches, hangs, fallbacks, server RSS and fds; kernel TCP vs sdpshim",
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&soakDuration, "duration", 0, "soak: how long each column runs (default 1m; 10s with --quick)")
			fs.BoolVar(&soakPreFork, "prefork", false, "soak: the server's listener shared with a fork child, as a pre-fork server's (the shim defers every connection)")
		},
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			lib, err := preloadPath("")
			if err != nil {
				return err
			}
			return soak.Run(soak.Config{Lib: lib, Environ: env.Environ, Duration: soakDuration, Quick: quick,
				PreFork: soakPreFork, Out: out, Log: benchProgress(env), Rec: rec})
		},
		Plots: soak.Plots,
	})
}
