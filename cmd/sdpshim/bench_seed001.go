package main

import (
	"io"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/bench/seed001"
)

// The seed-001 section: the credit, packed and nicassist flow controllers
// across two processes (bandwidth, buffer utilisation, communication
// progress) next to the paper's findings; its child processes are this
// executable re-executed, which ServePeer turns into the other side
// before the CLI starts.
func init() {
	seed001.ServePeer()
	registerBench(&BenchSection{
		Name:    "seed001",
		Order:   20,
		Summary: "flow control: credit vs packed vs nicassist (bandwidth, buffer utilisation, progress) vs the paper",
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			return seed001.Run(out, quick, rec)
		},
		Plots: seed001.Plots,
	})
}
