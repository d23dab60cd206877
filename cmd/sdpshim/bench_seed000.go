package main

import (
	"io"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/bench/seed000"
)

// The seed-000 section: the status-byte channel against its sliding-window
// baseline, across two processes; its child processes are this executable
// re-executed, which ServePeer turns into the experiment's other side
// before the CLI starts.
func init() {
	seed000.ServePeer()
	registerBench(&BenchSection{
		Name:    "seed000",
		Order:   10,
		Summary: "status-byte channel vs sliding window (sync latency, throughput, retained block, 12 cameras) vs the paper",
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			return seed000.Run(out, quick, rec)
		},
		Plots: seed000.Plots,
	})
}
