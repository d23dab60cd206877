package results

// PlotKind says how a Plot draws its figures.
type PlotKind int

const (
	// Lines draws one line per Figure.Series through (X, sdpshim
	// median), with the repeats' noise band (Values.Band) as error bars
	// (not on a log y axis) and the paper's values as separate marks.
	Lines PlotKind = iota
	// Bars draws, for each Figure.Category, one bar per Series: the
	// sdpshim median.
	Bars
	// RatioBars draws, for each Figure.Category, one bar: sdpshim's
	// advantage over kernel TCP (Figure.Advantage), with 1 marked.
	RatioBars
)

// Plot is one picture of a section: the figures of one Group. A section
// declares its plots beside its figures; the CLI draws those whose
// group has figures in the run.
type Plot struct {
	// Group selects the figures (Figure.Group); the file is
	// SECTION-GROUP.png.
	Group string
	// Title is the plot's first title line; the machine and date follow.
	Title string
	// XLabel and YLabel name the axes, units included.
	XLabel, YLabel string
	// LogX and LogY draw the axis on a base-2 (X) or base-10 (Y) log
	// scale.
	LogX, LogY bool
	// XBytes labels the x ticks as byte counts (256, 4K, 1M).
	XBytes bool
	// Kind says how to draw.
	Kind PlotKind
}
