package main

import (
	"io"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/bench/waiting"
)

// The waiting section (issue 7): busy, event, hybrid and adaptive waits
// under four traffic shapes and an idle connection, across two
// processes; its child processes are this executable re-executed, which
// ServePeer turns into the echo side before the CLI starts.
func init() {
	waiting.ServePeer()
	registerBench(&BenchSection{
		Name:    "waiting",
		Order:   30,
		Summary: "wait modes (busy, event, hybrid, adaptive) x traffic shapes: latency, CPU/msg, wakeups; idle CPU",
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			return waiting.Run(out, quick, rec)
		},
		Plots: waiting.Plots,
	})
}
