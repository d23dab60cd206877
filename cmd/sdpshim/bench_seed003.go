package main

import (
	"io"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/bench/seed003"
)

// The seed-003 section: PeRF's application types (D_App, M_App, B_App,
// and tenants of 1 and 16 streams) as one client and one server process
// of a plain sockets program, over kernel TCP and under the preload on
// the shared channel with and without preemption and in the default mode.
func init() {
	registerBench(&BenchSection{
		Name:    "seed003",
		Order:   25,
		Summary: "preemption: D_App/M_App alone and beside B_App, 1- vs 16-stream tenants; kernel TCP vs shared (PREEMPT on, off) vs direct",
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			lib, err := preloadPath("")
			if err != nil {
				return err
			}
			log := benchProgress(env)
			return seed003.Run(seed003.Config{Lib: lib, Environ: env.Environ, Quick: quick, Out: out, Log: log, Rec: rec})
		},
		Plots: seed003.Plots,
	})
}
