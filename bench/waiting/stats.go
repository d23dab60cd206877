package waiting

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Cell is one mode on one shape: medians over the repeats.
type Cell struct {
	Mode, Shape  string
	Rate         float64 // requests per second
	P50, P99     float64 // half round trip, us
	CPUPerMsg    float64 // both processes' CPU per request, us
	CPUPercent   float64 // both processes' CPU over the wall time, % of one core
	SleepsPerMsg float64 // wakeups (doorbell sleeps, both sides) per request
	RingsPerMsg  float64 // doorbell rings posted (both sides) per request
	Switches     float64 // adaptive mode switches per second (both sides)
	// Runs holds the same figures of every repeat.
	Runs CellRuns
}

// CellRuns are a Cell's figures, one per repeat.
type CellRuns struct {
	Rate, P50, P99, CPUPerMsg, CPUPercent, SleepsPerMsg, RingsPerMsg, Switches []float64
}

// IdleCell is an idle connection's cost in one mode.
type IdleCell struct {
	Mode       string
	Seconds    float64 // idle time measured
	CPUPercent float64 // both processes, % of one core
	Sleeps     float64 // wakeups over the idle time (both sides)
}

// percentile returns the q-quantile (0..1) of sorted by the nearest rank.
func percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of xs (the mean of the middle two when even).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize turns the repeats of one mode on one shape into a Cell.
func summarize(mode, shape string, runs []measurement) Cell {
	c := Cell{Mode: mode, Shape: shape}
	var rate, p50, p99, cpu, pct, sleeps, rings, sw []float64
	for _, m := range runs {
		lat := slices.Clone(m.Lat)
		slices.Sort(lat)
		msgs, wall := float64(max(m.Msgs, 1)), max(m.Wall.Seconds(), 1e-9)
		rate = append(rate, float64(m.Msgs)/wall)
		p50 = append(p50, float64(percentile(lat, 0.50))/1e3)
		p99 = append(p99, float64(percentile(lat, 0.99))/1e3)
		cpu = append(cpu, float64(m.Both.CPU)/1e3/msgs)
		pct = append(pct, float64(m.Both.CPU)/1e9/wall*100)
		sleeps = append(sleeps, float64(m.Both.Sleeps)/msgs)
		rings = append(rings, float64(m.Both.Rings)/msgs)
		sw = append(sw, float64(m.Both.Switches)/wall)
	}
	c.Rate, c.P50, c.P99 = median(rate), median(p50), median(p99)
	c.CPUPerMsg, c.CPUPercent = median(cpu), median(pct)
	c.SleepsPerMsg, c.RingsPerMsg, c.Switches = median(sleeps), median(rings), median(sw)
	c.Runs = CellRuns{rate, p50, p99, cpu, pct, sleeps, rings, sw}
	return c
}

// summarizeIdle turns the idle repeats of one mode into an IdleCell.
func summarizeIdle(mode string, runs []measurement) IdleCell {
	c := IdleCell{Mode: mode}
	var secs, pct, sleeps []float64
	for _, m := range runs {
		wall := max(m.Wall.Seconds(), 1e-9)
		secs = append(secs, wall)
		pct = append(pct, float64(m.Both.CPU)/1e9/wall*100)
		sleeps = append(sleeps, float64(m.Both.Sleeps))
	}
	c.Seconds, c.CPUPercent, c.Sleeps = median(secs), median(pct), median(sleeps)
	return c
}

// Target is one of issue 7's targets, judged on the measured cells.
type Target struct {
	Name   string
	Detail string // the figures compared
	Met    bool
	Known  bool // false when a figure it needs was not measured
}

// Target thresholds (issue 7).
const (
	tidalLatencyFactor = 1.5  // adaptive p50 at most this times busy's
	tidalCPUFactor     = 0.30 // adaptive CPU per message at most this times busy's
	idleCPUPercent     = 1.0  // adaptive idle connection, % of one core
)

// Targets judges the targets: adaptive against busy on the
// tidal shape, against hybrid on intermittent traffic, and the idle
// adaptive connection.
func Targets(cells []Cell, idle []IdleCell) []Target {
	find := func(mode, shape string) (Cell, bool) {
		for _, c := range cells {
			if c.Mode == mode && c.Shape == shape {
				return c, true
			}
		}
		return Cell{}, false
	}
	var ts []Target
	a, okA := find("adaptive", "tidal")
	b, okB := find("busy", "tidal")
	t := Target{Name: fmt.Sprintf("tidal: adaptive p50 <= %.1fx busy", tidalLatencyFactor), Known: okA && okB && b.P50 > 0}
	if t.Known {
		t.Detail = fmt.Sprintf("%.2f us vs %.2f us (%.2fx)", a.P50, b.P50, a.P50/b.P50)
		t.Met = a.P50 <= tidalLatencyFactor*b.P50
	}
	ts = append(ts, t)
	t = Target{Name: fmt.Sprintf("tidal: adaptive CPU/msg <= %.0f%% of busy", tidalCPUFactor*100), Known: okA && okB && b.CPUPerMsg > 0}
	if t.Known {
		t.Detail = fmt.Sprintf("%.2f us vs %.2f us (%.0f%%)", a.CPUPerMsg, b.CPUPerMsg, 100*a.CPUPerMsg/b.CPUPerMsg)
		t.Met = a.CPUPerMsg <= tidalCPUFactor*b.CPUPerMsg
	}
	ts = append(ts, t)
	a, okA = find("adaptive", "intermittent")
	h, okH := find("hybrid", "intermittent")
	t = Target{Name: "intermittent: adaptive sleeps/msg < hybrid", Known: okA && okH}
	if t.Known {
		t.Detail = fmt.Sprintf("%.3f vs %.3f per message", a.SleepsPerMsg, h.SleepsPerMsg)
		t.Met = a.SleepsPerMsg < h.SleepsPerMsg
	}
	ts = append(ts, t)
	t = Target{Name: fmt.Sprintf("idle: adaptive CPU < %.0f%%", idleCPUPercent)}
	for _, c := range idle {
		if c.Mode == "adaptive" {
			t.Known = true
			t.Detail = fmt.Sprintf("%.3f%% of a core over %.1f s", c.CPUPercent, c.Seconds)
			t.Met = c.CPUPercent < idleCPUPercent
		}
	}
	ts = append(ts, t)
	return ts
}

// WriteTable prints the cells, the idle costs and the targets.
func WriteTable(w io.Writer, cells []Cell, idle []IdleCell, repeats int, dur time.Duration) {
	fmt.Fprintf(w, "wait modes x traffic shapes: two processes, one status-byte channel, %d B request/echo; median of %d run(s) of %v\n\n",
		msgSize, repeats, dur)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\tmode\treq/s\tp50 us\tp99 us\tCPU us/msg\tCPU %\tsleeps/msg\trings/msg\tswitches/s\t")
	for _, c := range cells {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%.3f\t%.3f\t%.1f\t\n",
			c.Shape, c.Mode, c.Rate, c.P50, c.P99, c.CPUPerMsg, c.CPUPercent, c.SleepsPerMsg, c.RingsPerMsg, c.Switches)
	}
	tw.Flush()
	if len(idle) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "idle connection\tmode\tseconds\tCPU %\twakeups\t")
		for _, c := range idle {
			fmt.Fprintf(tw, "\t%s\t%.1f\t%.3f\t%.0f\t\n", c.Mode, c.Seconds, c.CPUPercent, c.Sleeps)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	for _, t := range Targets(cells, idle) {
		verdict := "not measured"
		if t.Known {
			verdict = "not met"
			if t.Met {
				verdict = "met"
			}
		}
		fmt.Fprintf(w, "target %-44s %-8s %s\n", t.Name+":", verdict, t.Detail)
	}
	var notes []string
	for _, s := range Shapes {
		notes = append(notes, s.Name+": "+s.Note)
	}
	fmt.Fprintf(w, "\nshapes: %s\n", strings.Join(notes, "; "))
	fmt.Fprintln(w, "latency = round trip / 2; CPU = user+system of both processes (getrusage); % of one core;")
	fmt.Fprintln(w, "sleeps = waits ended by a doorbell wake; rings = doorbell rings posted (only to an armed peer)")
}
