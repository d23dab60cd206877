package seed000

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
)

// Plots are the section's pictures of its recorded figures.
var Plots = []results.Plot{
	{Group: "sync-latency", Title: "sync control latency against blocks (median of the samples)",
		XLabel: "blocks in the channel", YLabel: "sync control latency (us)", LogX: true, LogY: true},
	{Group: "latency", Title: "transmission latency, one way",
		XLabel: "message size (bytes)", YLabel: "latency (us)", LogX: true, LogY: true, XBytes: true},
	{Group: "throughput", Title: "throughput, one stream (median of 5 runs, bars: their IQR)",
		XLabel: "message size (bytes)", YLabel: "throughput (MB/s)", LogX: true, XBytes: true},
	{Group: "throughput-ratio", Title: "throughput, status-byte over sliding window",
		XLabel: "message size (bytes)", YLabel: "statusbyte / slidingwindow (x)", LogX: true, XBytes: true},
	{Group: "retain", Title: "retained block: slot held from 100 to 200 ms (the median run)",
		XLabel: "time (ms)", YLabel: "throughput per 10 ms (MB/s)"},
}

func recordSync(rec *results.Recorder, tr string, blocks int, us []float64, med float64) {
	fig := results.Figure{Name: fmt.Sprintf("sync latency, %d blocks, %s", blocks, tr), Unit: "us",
		Group: "sync-latency", Series: tr, X: float64(blocks), Shim: results.Of(us, med)}
	if blocks == 3 {
		fig.Paper = results.Paper(map[string]float64{StatusByte: paperSyncStatus, SlidingWindow: paperSyncWindow}[tr])
	}
	rec.Add(fig)
}

func recordSyncRatio(rec *results.Recorder, blocks int, r float64) {
	fig := results.Figure{Name: fmt.Sprintf("sync latency slidingwindow/statusbyte, %d blocks", blocks), Unit: "x",
		Higher: true, Shim: results.One(r)}
	if blocks == 3 {
		fig.Paper = results.Paper(paperSyncWindow / paperSyncStatus)
		fig.Target = &results.Target{Text: fmt.Sprintf(">= %.0fx", targetSyncRatio), Met: r >= targetSyncRatio}
	}
	rec.Add(fig)
}

func recordLatency(rec *results.Recorder, tr string, size int, us []float64, med float64) {
	rec.Add(results.Figure{Name: fmt.Sprintf("latency one way, %s, %s", sizeName(size), tr), Unit: "us",
		Group: "latency", Series: tr, X: float64(size), Shim: results.Of(us, med)})
}

func recordThroughput(rec *results.Recorder, tr string, size int, runs []ThroughputResult, med ThroughputResult) {
	mbps := make([]float64, len(runs))
	for i, r := range runs {
		mbps[i] = r.MBps()
	}
	fig := results.Figure{Name: fmt.Sprintf("throughput, %s, %s", sizeName(size), tr), Unit: "MB/s", Higher: true,
		Group: "throughput", Series: tr, X: float64(size), Shim: results.Of(mbps, med.MBps())}
	if tr == StatusByte && size == targetSize {
		fig.Target = &results.Target{Text: fmt.Sprintf(">= %.0f MB/s", targetStreamMBs), Met: med.MBps() >= targetStreamMBs}
	}
	rec.Add(fig)
	send, recv := med.CPUPerMiB()
	rec.Add(results.Figure{Name: fmt.Sprintf("send CPU per MiB, %s, %s", sizeName(size), tr), Unit: "us/MiB", Shim: results.One(send)})
	rec.Add(results.Figure{Name: fmt.Sprintf("receive CPU per MiB, %s, %s", sizeName(size), tr), Unit: "us/MiB", Shim: results.One(recv)})
}

func recordThroughputRatio(rec *results.Recorder, size int, r float64, sb, sw ThroughputResult) {
	fig := results.Figure{Name: fmt.Sprintf("throughput statusbyte/slidingwindow, %s", sizeName(size)), Unit: "x", Higher: true,
		Group: "throughput-ratio", Series: "statusbyte / slidingwindow", X: float64(size), Shim: results.One(r)}
	if size == 256 {
		fig.Paper = results.Paper(paperThr256)
		fig.Target = &results.Target{Text: fmt.Sprintf(">= %.0fx", targetThr256), Met: r >= targetThr256}
	}
	rec.Add(fig)
	as, _ := sb.CPUPerMiB()
	bs, _ := sw.CPUPerMiB()
	rec.Add(results.Figure{Name: fmt.Sprintf("send CPU statusbyte/slidingwindow, %s", sizeName(size)), Unit: "x",
		Shim: results.One(ratio(as, bs)), Paper: results.Paper(paperCPU)})
}

// recordRetain records the held/before ratio of every run and the
// timeline of the median one.
func recordRetain(rec *results.Recorder, r RetainResult, ratios []float64) {
	paper := map[string]float64{StatusByte: paperRetainRatio, SlidingWindow: 0}[r.Transport]
	rec.Add(results.Figure{Name: "retained block held/before throughput, " + r.Transport, Unit: "x", Higher: true,
		Shim: results.Of(ratios, r.heldRatio()), Paper: results.Paper(paper)})
	for i, rate := range r.Rates {
		ms := float64(time.Duration(i) * retainBin / time.Millisecond)
		rec.Add(results.Figure{Name: fmt.Sprintf("retained block timeline, %.0f ms, %s", ms, r.Transport), Unit: "MB/s",
			Higher: true, Group: "retain", Series: r.Transport, X: ms, Shim: results.One(rate)})
	}
}

// recordCamera records the camera run's CV over every repeat and the
// other figures of the median run.
func recordCamera(rec *results.Recorder, tr string, cvs []float64, res CameraResult) {
	rec.Add(results.Figure{Name: "camera throughput CV, " + tr, Unit: "", Shim: results.Of(cvs, cv(res.Rates))})
	m, _ := meanStd(res.Rates)
	ms := micros(res.Lat)
	for i := range ms {
		ms[i] /= 1000
	}
	secs := res.Duration.Seconds()
	for _, x := range []struct {
		name, unit string
		v          float64
	}{
		{"camera mean throughput", "MB/s", m},
		{"camera frame latency p50", "ms", median(ms)},
		{"camera frame latency p99", "ms", quantile(ms, 0.99)},
		{"camera send CPU", "% of a core", 100 * res.SenderCPU.Seconds() / secs},
		{"camera receive CPU", "% of a core", 100 * res.ReceiverCPU.Seconds() / secs},
	} {
		rec.Add(results.Figure{Name: x.name + ", " + tr, Unit: x.unit, Higher: x.unit == "MB/s", Shim: results.One(x.v)})
	}
}
