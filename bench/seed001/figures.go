package seed001

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// Plots are the section's pictures of its recorded figures.
var Plots = []results.Plot{
	{Group: "bandwidth-64k", Title: "bandwidth, 64 KiB receive buffer (median of the runs, bars: their spread)",
		XLabel: "message size (bytes)", YLabel: "bandwidth (MB/s)", LogX: true, XBytes: true},
	{Group: "bandwidth-256k", Title: "bandwidth, 256 KiB receive buffer (median of the runs, bars: their spread)",
		XLabel: "message size (bytes)", YLabel: "bandwidth (MB/s)", LogX: true, XBytes: true},
	{Group: "bandwidth-ratio", Title: "bandwidth over credit's",
		XLabel: "message size (bytes)", YLabel: "bandwidth / credit's (x)", LogX: true, XBytes: true},
	{Group: "utilisation", Title: "buffer utilisation during the bandwidth runs",
		XLabel: "message size (bytes)", YLabel: "data / payload room of the blocks sent (%)", LogX: true, XBytes: true},
	{Group: "progress", Title: "communication progress, receiver unpaced (median of the bursts, bars: IQR)",
		XLabel: "computation after each burst (ms)", YLabel: "burst start to all received (ms)"},
	{Group: "progress-paced", Title: "progress, receiver paced as the paper's link (median, bars: IQR of the bursts)",
		XLabel: "computation after each burst (ms)", YLabel: "burst start to all received (ms)"},
}

// record adds every figure of the tables to rec.
func record(rec *results.Recorder, bw map[bwKey]bwCell, prog map[progKey]progCell, pl plan) {
	for _, buffer := range Buffers {
		buf := sizeName(buffer)
		for _, flow := range Flows {
			for _, size := range MessageSizes {
				c := bw[bwKey{buffer, flow, size}]
				rec.Add(results.Figure{Name: fmt.Sprintf("bandwidth, %s buffer, %s, %s", buf, flow, sizeName(size)), Unit: "MB/s",
					Higher: true, Group: fmt.Sprintf("bandwidth-%dk", buffer>>10), Series: flow, X: float64(size),
					Shim: results.Of(c.mbpsRuns, c.mbps)})
				util := results.Figure{Name: fmt.Sprintf("buffer utilisation, %s buffer, %s, %s", buf, flow, sizeName(size)), Unit: "%",
					Higher: true, Group: "utilisation", Series: flow + " " + buf, X: float64(size),
					Shim: results.Of(percent(c.utilRuns), 100*c.util)}
				if flow == flowcontrol.NameCredit && buffer == Buffers[0] {
					util.Paper = results.Paper(100 * min(1, float64(size)/blockPayload))
				}
				rec.Add(util)
			}
		}
		recordRatios(rec, bw, buffer)
	}
	for _, pace := range Paces {
		group := "progress"
		if pace > 0 {
			group = "progress-paced"
		}
		for _, buffer := range Buffers {
			recordProgress(rec, prog, buffer, pace, pl, group)
		}
	}
}

// recordRatios records each scheme's bandwidth over credit's, and the
// targets on the worst of the small messages.
func recordRatios(rec *results.Recorder, bw map[bwKey]bwCell, buffer int) {
	for _, flow := range Flows[1:] {
		for _, size := range MessageSizes {
			r := ratio(bw[bwKey{buffer, flow, size}].mbps, bw[bwKey{buffer, flowcontrol.NameCredit, size}].mbps)
			fig := results.Figure{Name: fmt.Sprintf("bandwidth %s/credit, %s buffer, %s", flow, sizeName(buffer), sizeName(size)),
				Unit: "x", Higher: true, Group: "bandwidth-ratio", Series: fmt.Sprintf("%s/credit %s", flow, sizeName(buffer)),
				X: float64(size), Shim: results.One(r)}
			if flow == flowcontrol.NamePacked && buffer == Buffers[0] && size <= paperSmallMax {
				fig.Paper = results.Paper(paperSmallRatio)
			}
			rec.Add(fig)
		}
	}
	for _, t := range []struct {
		flow string
		t    target
	}{{flowcontrol.NamePacked, targetPackedBW}, {flowcontrol.NameNICAssist, targetNICBW}} {
		w := worstSmall(bw, buffer, t.flow)
		rec.Add(results.Figure{Name: fmt.Sprintf("%s, %s buffer", t.t.what, sizeName(buffer)), Unit: "x", Higher: true,
			Shim: results.One(w), Paper: results.Paper(paperSmallRatio), Target: t.t.of(w)})
	}
}

// worstSmall is flow's lowest bandwidth over credit's for the messages
// the paper's ~10x covers (256 B to 4 KiB).
func worstSmall(bw map[bwKey]bwCell, buffer int, flow string) float64 {
	worst := -1.0
	for _, size := range MessageSizes {
		if size > paperSmallMax {
			continue
		}
		r := ratio(bw[bwKey{buffer, flow, size}].mbps, bw[bwKey{buffer, flowcontrol.NameCredit, size}].mbps)
		if worst < 0 || r < worst {
			worst = r
		}
	}
	return max(worst, 0)
}

// recordProgress records one progress table: receive and total times
// per computation, and the targets at 10 ms.
func recordProgress(rec *results.Recorder, prog map[progKey]progCell, buffer int, pace time.Duration, pl plan, group string) {
	where := fmt.Sprintf("%s buffer, receiver unpaced", sizeName(buffer))
	if pace > 0 {
		where = fmt.Sprintf("%s buffer, receiver paced", sizeName(buffer))
	}
	for _, flow := range Flows {
		for _, compute := range pl.progCompute {
			c := prog[progKey{buffer, pace, flow, compute}]
			rec.Add(results.Figure{Name: fmt.Sprintf("progress receive time, %s, %s, compute %v", where, flow, compute), Unit: "ms",
				Group: group, Series: flow + " " + sizeName(buffer), X: ms(compute), Shim: results.Of(c.receivedRuns, c.received)})
			rec.Add(results.Figure{Name: fmt.Sprintf("progress total time, %s, %s, compute %v", where, flow, compute), Unit: "ms",
				Shim: results.Of(c.totalRuns, c.total)})
		}
	}
	last := pl.progCompute[len(pl.progCompute)-1]
	if last != 10*time.Millisecond {
		return
	}
	credit := prog[progKey{buffer, pace, flowcontrol.NameCredit, last}].received
	for _, t := range []struct {
		flow string
		t    target
	}{{flowcontrol.NameNICAssist, targetNICProg}, {flowcontrol.NamePacked, targetPackedProg}} {
		r := ratio(prog[progKey{buffer, pace, t.flow, last}].received, credit)
		rec.Add(results.Figure{Name: fmt.Sprintf("%s, %s", t.t.what, where), Unit: "x", Shim: results.One(r), Target: t.t.of(r)})
	}
}

func percent(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = 100 * x
	}
	return out
}
