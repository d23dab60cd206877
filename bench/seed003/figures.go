package seed003

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sdpshim/sdpshim/bench/results"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// sample is one mode's figures of one repeat, by key: a workload's key,
// a dot, the figure ("db.p99": D_App's p99 beside B_App).
type sample map[string]float64

// figures are the workload's figures from its client's report: D's p50
// and p99 (us), M's message rate (millions a second), B's throughput
// (GB/s); for the two bulk tenants (or the two groups of streams of one
// process), the first one's share of the bytes (%) and both together
// (GB/s).
func (w workload) figures(r report) sample {
	s := sample{}
	gbps := func(bytes float64) float64 { return bytes / r.Seconds / 1e9 }
	if w.key == "share" || w.key == "streams" {
		one, many := r.Tenants[0].Bytes, r.Tenants[1].Bytes
		if one+many > 0 {
			s[w.key+".one"] = 100 * one / (one + many)
		}
		s[w.key+".total"] = gbps(one + many)
		return s
	}
	for _, t := range r.Tenants {
		switch t.Type {
		case "D":
			s[w.key+".p50"], s[w.key+".p99"] = t.P50, t.P99
		case "M":
			s[w.key+".rate"] = t.Msgs / r.Seconds / 1e6
		case "B":
			s[w.key+".bulk"] = gbps(t.Bytes)
		}
	}
	return s
}

// scheduler is the client's preemptions, pauses and CPU moves a second,
// from the stats of its processes read near the end of its run (the
// warm-up included), summed over them; none unless every process's were
// read.
func (w workload) scheduler(snaps []*stats.Snapshot) sample {
	want := 1
	if w.procs {
		want = len(w.tenants)
	}
	if len(snaps) != want {
		return nil
	}
	s := sample{}
	for _, snap := range snaps {
		secs := snap.Time.Sub(snap.Process.Started).Seconds()
		if secs <= 0 {
			return nil
		}
		s[w.key+".preempt"] += float64(snap.Scheduler.Preemptions) / secs
		s[w.key+".pause"] += float64(snap.Scheduler.Pauses) / secs
		s[w.key+".moves"] += float64(snap.Scheduler.Moves) / secs
	}
	return s
}

// derive adds the ratios the targets judge to one repeat's samples: in
// every mode, D_App's p99 and M_App's rate beside B_App over alone; in
// the shared and the direct mode, B_App's throughput with preemption
// over without.
func derive(run []sample) {
	ratio := func(s sample, key, num, den string) {
		n, ok1 := s[num]
		d, ok2 := s[den]
		if ok1 && ok2 && d > 0 {
			s[key] = n / d
		}
	}
	for _, s := range run {
		if s != nil {
			ratio(s, "db.p99x", "db.p99", "d.p99")
			ratio(s, "mb.ratex", "mb.rate", "m.rate")
			ratio(s, "dbp.p99x", "dbp.p99", "d.p99")
			ratio(s, "mbp.ratex", "mbp.rate", "m.rate")
		}
	}
	for _, pair := range [][2]int{{shared, sharedOff}, {direct, directOff}} {
		on, off := run[pair[0]], run[pair[1]]
		if on == nil || off == nil {
			continue
		}
		for _, key := range []string{"b.bulk", "db.bulk"} {
			if n, d := on[key], off[key]; n > 0 && d > 0 {
				on[key+".onoff"] = n / d
			}
		}
	}
}

// row is one line of the table: one figure in each of its modes.
type row struct {
	key, label, unit string
	// name is the figure's name in the results (with the mode after
	// it); "" for the label. An indented label needs one.
	name   string
	higher bool
	format string
	// modes are the columns the figure exists in; nil for all.
	modes []int
	// target is the goal, judged in the modes judged; "" for
	// none.
	target string
	judged []int
	meets  func(float64) bool
	// group and category place the figure's sdpshim medians in a bar
	// plot, one bar per mode; "" for none.
	group, category string
}

func atMost(x float64) func(float64) bool  { return func(v float64) bool { return v <= x } }
func atLeast(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }

var shimModes = []int{shared, sharedOff, direct, directOff}

// rows are the table's lines, each ratio under the figures it divides.
// Issue 13's targets: the ping-pong's p99 beside bulk at most twice
// alone's, on the shared channel and in the default mode; bulk with
// preemption at least 95% of without; M_App beside bulk at least 80% of
// alone; a one-stream tenant at least 40% of the channel beside a
// sixteen-stream one.
var rows = []row{
	{key: "d.p50", label: "D_App alone, round trip p50", unit: "us", format: "%.1f"},
	{key: "d.p99", label: "D_App alone, round trip p99", unit: "us", format: "%.1f"},
	{key: "db.p50", label: "D_App beside B_App, round trip p50", unit: "us", format: "%.1f"},
	{key: "db.p99", label: "D_App beside B_App, round trip p99", unit: "us", format: "%.1f"},
	{key: "db.p99x", label: "  p99 beside B_App / alone", name: "D_App p99 beside B_App / alone", unit: "x", format: "%.2fx",
		target: "<= 2x", judged: []int{shared, direct}, meets: atMost(2), group: "dapp-p99", category: "p99 beside B_App / alone"},
	{key: "b.bulk", label: "B_App alone, throughput", unit: "GB/s", higher: true, format: "%.2f", group: "bapp", category: "alone"},
	{key: "b.bulk.onoff", label: "  PREEMPT on / off", name: "B_App alone, throughput PREEMPT on / off", unit: "x", higher: true, format: "%.2fx", modes: []int{shared, direct},
		target: ">= 0.95x", judged: []int{shared, direct}, meets: atLeast(0.95)},
	{key: "db.bulk", label: "B_App beside D_App, throughput", unit: "GB/s", higher: true, format: "%.2f", group: "bapp", category: "beside D_App"},
	{key: "db.bulk.onoff", label: "  PREEMPT on / off", name: "B_App beside D_App, throughput PREEMPT on / off", unit: "x", higher: true, format: "%.2fx", modes: []int{shared, direct}},
	{key: "m.rate", label: "M_App alone, message rate", unit: "M msg/s", higher: true, format: "%.3f", group: "mapp-rate", category: "alone"},
	{key: "m.line", label: "  the machine's cache-line round trip just before", name: "cache-line round trip before M_App alone", unit: "ns", format: "%.0f"},
	{key: "mb.rate", label: "M_App beside B_App, message rate", unit: "M msg/s", higher: true, format: "%.3f", group: "mapp-rate", category: "beside B_App"},
	{key: "mb.ratex", label: "  rate beside B_App / alone", name: "M_App rate beside B_App / alone", unit: "x", higher: true, format: "%.2fx",
		target: ">= 0.8x", judged: []int{shared, direct}, meets: atLeast(0.8)},
	{key: "mb.bulk", label: "B_App beside M_App, throughput", unit: "GB/s", higher: true, format: "%.2f", group: "bapp", category: "beside M_App"},
	{key: "dbp.p99", label: "D_App beside B_App of another process, round trip p99", unit: "us", format: "%.1f"},
	{key: "dbp.p99x", label: "  p99 beside B_App of another process / alone", name: "D_App p99 beside B_App of another process / alone", unit: "x", format: "%.2fx",
		target: "<= 2x", judged: []int{direct}, meets: atMost(2), group: "dapp-p99", category: "p99 beside another process's B_App / alone"},
	{key: "dbp.bulk", label: "B_App beside D_App of another process, throughput", unit: "GB/s", higher: true, format: "%.2f", group: "bapp", category: "beside another process's D_App"},
	{key: "mbp.rate", label: "M_App beside B_App of another process, message rate", unit: "M msg/s", higher: true, format: "%.3f", group: "mapp-rate", category: "beside another process's B_App"},
	{key: "mbp.ratex", label: "  rate beside B_App of another process / alone", name: "M_App rate beside B_App of another process / alone", unit: "x", higher: true, format: "%.2fx",
		target: ">= 0.8x", judged: []int{direct}, meets: atLeast(0.8)},
	{key: "mbp.bulk", label: "B_App beside M_App of another process, throughput", unit: "GB/s", higher: true, format: "%.2f", group: "bapp", category: "beside another process's M_App"},
	{key: "share.one", label: "1-stream tenant's share beside a 16-stream tenant", unit: "%", higher: true, format: "%.1f",
		target: ">= 40%", judged: []int{shared, direct}, meets: atLeast(40), group: "share", category: "1-stream tenant"},
	{key: "share.total", label: "  both tenants together, throughput", name: "1-stream and 16-stream tenants together, throughput", unit: "GB/s", higher: true, format: "%.2f"},
	{key: "streams.one", label: "  the same 17 streams in one process: the 1 stream's share", name: "1 stream's share beside 16 of the same process", unit: "%", higher: true, format: "%.1f"},
	{key: "b.preempt", label: "client preemptions/s, B_App alone", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "b.pause", label: "client pauses/s, B_App alone", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "db.preempt", label: "client preemptions/s, D_App beside B_App", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "db.pause", label: "client pauses/s, D_App beside B_App", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "mb.preempt", label: "client preemptions/s, M_App beside B_App", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "mb.pause", label: "client pauses/s, M_App beside B_App", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "dbp.pause", label: "client pauses/s, D_App beside B_App of another process", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "mbp.pause", label: "client pauses/s, M_App beside B_App of another process", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "share.preempt", label: "client preemptions/s, 1 beside 16 streams", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "share.pause", label: "client pauses/s, 1 beside 16 streams", unit: "/s", format: "%.0f", modes: shimModes},
	{key: "db.moves", label: "client CPU moves/s, D_App beside B_App", unit: "/s", format: "%.1f", modes: shimModes},
	{key: "mb.moves", label: "client CPU moves/s, M_App beside B_App", unit: "/s", format: "%.1f", modes: shimModes},
}

// in says whether the row has a figure in mode m.
func (r row) in(m int) bool { return r.modes == nil || slices.Contains(r.modes, m) }

// Plots are the section's pictures: sdpshim's medians, one bar per mode.
var Plots = []results.Plot{
	{Group: "dapp-p99", Title: "D_App's p99 beside B_App over alone (target <= 2x)",
		YLabel: "p99 beside / alone (x)", Kind: results.Bars},
	{Group: "bapp", Title: "B_App (1 MiB writes) throughput", YLabel: "GB/s", Kind: results.Bars},
	{Group: "mapp-rate", Title: "M_App (32 x 16 B) message rate", YLabel: "million messages/s", Kind: results.Bars},
	{Group: "share", Title: "1-stream tenant's share beside a 16-stream one", YLabel: "share of the bytes (%)", Kind: results.Bars},
}

// valuesOf are the repeats of key in mode m, and their median; nil for
// none.
func valuesOf(runs [][]sample, key string, m int) *results.Values {
	var v []float64
	for _, run := range runs {
		if x, ok := run[m][key]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return results.Of(v, median(v))
}

// median of a non-empty v.
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeTable prints every row: its median in each mode ("-" where the
// figure does not exist, "failed" where it was not measured), its
// target and whether each judged mode met it.
func writeTable(w io.Writer, runs [][]sample) {
	// The columns are right-aligned, the labels padded to one width:
	// left-aligned, the ratios' indentation kept.
	width := 0
	for _, r := range rows {
		width = max(width, len(r.label))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{fmt.Sprintf("%-*s", width, "figure"), "unit"}
	for _, m := range modes {
		head = append(head, m.name)
	}
	fmt.Fprintln(tw, strings.Join(append(head, "target", "met"), "\t")+"\t")
	for _, r := range rows {
		cells := []string{fmt.Sprintf("%-*s", width, r.label), r.unit}
		var met []string
		for m := range modes {
			v := valuesOf(runs, r.key, m)
			switch {
			case !r.in(m):
				cells = append(cells, "-")
			case v == nil:
				cells = append(cells, "failed")
			default:
				cells = append(cells, fmt.Sprintf(r.format, v.Median))
			}
			if v != nil && slices.Contains(r.judged, m) {
				met = append(met, fmt.Sprintf("%s %s", modes[m].name, map[bool]string{true: "yes", false: "NO"}[r.meets(v.Median)]))
			}
		}
		fmt.Fprintln(tw, strings.Join(append(cells, r.target, strings.Join(met, ", ")), "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w, "modes: shared = SDPSHIM_CHANNEL=shared (one channel for the process pair), preemption on; shared PREEMPT=0 = the same without preemption; direct = the default mode (an area per connection); direct PREEMPT=0 = the same without. In both modes preemption gives the CPU to small messages that lost it (docs/direct.md, \"Preemption\"), so B_App beside them is slower by design: its target (>= 0.95x of PREEMPT=0) is judged alone, where nothing is preempted")
	fmt.Fprintln(w, "ratios: medians of each repeat's ratio; client preemptions, pauses and CPU moves (direct: a wait that moved its thread off its peer's CPU): the client's stats read at 90% of its run")
	fmt.Fprintln(w, "paper: none of PeRF's figures is quoted in this repository, so no row has a paper value")
}

// record adds every row's figure in each shim mode to rec, with kernel
// TCP's beside it where the row has one, the target where the mode is
// judged, and the plot placement.
func record(rec *results.Recorder, runs [][]sample) {
	for _, r := range rows {
		var kernelValues *results.Values
		if r.in(kernel) {
			kernelValues = valuesOf(runs, r.key, kernel)
		}
		for _, m := range shimModes {
			if !r.in(m) {
				continue
			}
			name := r.name
			if name == "" {
				name = r.label
			}
			f := results.Figure{Name: name + ", " + modes[m].name, Unit: r.unit, Higher: r.higher,
				Group: r.group, Series: modes[m].name, Category: r.category,
				Kernel: kernelValues, Shim: valuesOf(runs, r.key, m)}
			if f.Shim != nil && slices.Contains(r.judged, m) {
				f.Target = &results.Target{Text: r.target, Met: r.meets(f.Shim.Median)}
			}
			rec.Add(f)
		}
	}
}
