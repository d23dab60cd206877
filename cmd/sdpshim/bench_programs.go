package main

import (
	"io"
	"os"
	"strings"

	"github.com/sdpshim/sdpshim/bench/programs"
	"github.com/sdpshim/sdpshim/bench/results"
)

func init() {
	registerBench(&BenchSection{
		Name:    "programs",
		Order:   50,
		Summary: "unmodified programs (sockperf, iperf3, redis, nginx+wrk, memcached, pgbench) over kernel TCP and under the shim; passthrough and start-up costs",
		Run: func(env *Env, out io.Writer, quick bool, rec *results.Recorder) error {
			lib, err := preloadPath("")
			if err != nil {
				return err
			}
			log := benchProgress(env)
			var only []string
			if v := os.Getenv("SDPSHIM_BENCH_PROGRAMS"); v != "" {
				only = strings.Split(v, ",")
			}
			return programs.Run(programs.Config{Lib: lib, Environ: env.Environ, Quick: quick, Out: out, Log: log, Rec: rec, Only: only})
		},
		Plots: programs.Plots,
	})
}
