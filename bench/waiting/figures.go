package waiting

import (
	"fmt"

	"github.com/sdpshim/sdpshim/bench/results"
)

// Plots are the section's pictures of its recorded figures: per traffic
// shape, one bar per wait mode.
var Plots = []results.Plot{
	{Group: "latency", Title: "half round trip p50 per wait mode and traffic shape",
		XLabel: "traffic shape", YLabel: "latency p50 (us)", Kind: results.Bars},
	{Group: "cpu", Title: "CPU per request per wait mode and traffic shape",
		XLabel: "traffic shape", YLabel: "CPU of both processes per request (us)", Kind: results.Bars},
	{Group: "idle", Title: "an idle connection's CPU per wait mode",
		XLabel: "wait mode", YLabel: "CPU of both processes (% of one core)", Kind: results.Bars},
}

// record adds every figure of the table and the targets to rec.
func record(rec *results.Recorder, cells []Cell, idle []IdleCell) {
	for _, c := range cells {
		for _, x := range []struct {
			name, unit, group string
			higher            bool
			runs              []float64
			median            float64
		}{
			{"requests per second", "req/s", "", true, c.Runs.Rate, c.Rate},
			{"latency p50", "us", "latency", false, c.Runs.P50, c.P50},
			{"latency p99", "us", "", false, c.Runs.P99, c.P99},
			{"CPU per request", "us", "cpu", false, c.Runs.CPUPerMsg, c.CPUPerMsg},
			{"CPU", "% of a core", "", false, c.Runs.CPUPercent, c.CPUPercent},
			{"sleeps per request", "", "", false, c.Runs.SleepsPerMsg, c.SleepsPerMsg},
			{"rings per request", "", "", false, c.Runs.RingsPerMsg, c.RingsPerMsg},
			{"mode switches per second", "1/s", "", false, c.Runs.Switches, c.Switches},
		} {
			rec.Add(results.Figure{Name: fmt.Sprintf("%s, %s, %s", x.name, c.Shape, c.Mode), Unit: x.unit, Higher: x.higher,
				Group: x.group, Series: c.Mode, Category: c.Shape, Shim: results.Of(x.runs, x.median)})
		}
	}
	for _, c := range idle {
		rec.Add(results.Figure{Name: "idle CPU, " + c.Mode, Unit: "% of a core", Group: "idle", Series: "idle connection",
			Category: c.Mode, Shim: results.One(c.CPUPercent)})
		rec.Add(results.Figure{Name: "idle wakeups, " + c.Mode, Unit: "", Shim: results.One(c.Sleeps)})
	}
	for _, t := range Targets(cells, idle) {
		if t.Known {
			rec.Add(results.Figure{Name: "target: " + t.Name + " (" + t.Detail + ")", Target: &results.Target{Text: t.Name, Met: t.Met}})
		}
	}
}
