package results

import (
	"math"
	"sort"
)

// Values are the repeats of one figure and their median. Median is the
// section's own median of Repeats (the one its table prints), so the
// file and the table agree.
type Values struct {
	Repeats []float64 `json:"repeats"`
	Median  float64   `json:"median"`
}

// Of returns Values for repeats with the given median.
func Of(repeats []float64, median float64) *Values {
	return &Values{Repeats: append([]float64(nil), repeats...), Median: median}
}

// One returns Values of a single measurement.
func One(v float64) *Values { return Of([]float64{v}, v) }

// Target is a figure's goal (issue targets: reported, not enforced).
type Target struct {
	// Text states the goal, e.g. ">= 4x sliding window".
	Text string `json:"text"`
	// Met says whether the run reached it.
	Met bool `json:"met"`
}

// Figure is one measured number of a section: what sdpshim achieved,
// and kernel TCP's figure where the section measured it too.
type Figure struct {
	// Section is the bench section that measured it (set by Recorder).
	Section string `json:"section"`
	// Name identifies the figure within its section; Compare matches
	// runs by Section and Name.
	Name string `json:"name"`
	// Unit of the values, e.g. "us", "MB/s", "x" for a ratio.
	Unit string `json:"unit"`
	// Higher is true when a higher value is better (throughput).
	Higher bool `json:"higher_is_better"`
	// Group names the plot the figure is drawn in ("" for none).
	Group string `json:"group,omitempty"`
	// Series is the figure's line or bar set within the plot, e.g.
	// "statusbyte" or "credit 64 KiB".
	Series string `json:"series,omitempty"`
	// X is the figure's position on a line plot's x axis (blocks,
	// bytes, ms).
	X float64 `json:"x,omitempty"`
	// Category is the figure's place on a bar plot's x axis.
	Category string `json:"category,omitempty"`
	// Kernel holds kernel TCP's values, nil where none was measured.
	Kernel *Values `json:"kernel,omitempty"`
	// Shim holds sdpshim's values (nil when the measurement failed).
	Shim *Values `json:"sdpshim,omitempty"`
	// Paper is the seed paper's value for the same figure, nil where
	// the paper gives none.
	Paper *float64 `json:"paper,omitempty"`
	// Target is the figure's goal, nil where it has none.
	Target *Target `json:"target,omitempty"`
}

// Advantage is sdpshim's advantage over kernel TCP, above 1 when
// sdpshim is better: Shim/Kernel for a figure where higher is better,
// Kernel/Shim otherwise. ok is false unless both medians are positive.
func (f Figure) Advantage() (ratio float64, ok bool) {
	if f.Kernel == nil || f.Shim == nil || f.Kernel.Median <= 0 || f.Shim.Median <= 0 {
		return 0, false
	}
	if f.Higher {
		return f.Shim.Median / f.Kernel.Median, true
	}
	return f.Kernel.Median / f.Shim.Median, true
}

// Paper returns a pointer to v, for Figure.Paper.
func Paper(v float64) *float64 { return &v }

// Recorder collects the figures of one section while it runs. A nil
// Recorder records nothing, so a section can run without one.
type Recorder struct {
	section string
	figures []Figure
}

// NewRecorder returns an empty Recorder for section.
func NewRecorder(section string) *Recorder { return &Recorder{section: section} }

// Add records f under the Recorder's section.
func (r *Recorder) Add(f Figure) {
	if r == nil {
		return
	}
	f.Section = r.section
	f.Kernel, f.Shim = finite(f.Kernel), finite(f.Shim)
	r.figures = append(r.figures, f)
}

// Figures returns what was recorded, in order.
func (r *Recorder) Figures() []Figure {
	if r == nil {
		return nil
	}
	return r.figures
}

// finite returns v without the repeats that are not finite numbers
// (JSON has no NaN), nil when its median is not one.
func finite(v *Values) *Values {
	if v == nil || math.IsNaN(v.Median) || math.IsInf(v.Median, 0) {
		return nil
	}
	out := &Values{Median: v.Median}
	for _, x := range v.Repeats {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out.Repeats = append(out.Repeats, x)
		}
	}
	return out
}

// Band is the noise band of v's repeats: their range (min to max) for
// fewer than five, their interquartile range (nearest rank) from five
// on. Compare's rule and the plots' error bars both use it.
func (v *Values) Band() (lo, hi float64) {
	if len(v.Repeats) == 0 {
		return v.Median, v.Median
	}
	s := append([]float64(nil), v.Repeats...)
	sort.Float64s(s)
	if len(s) < 5 {
		return s[0], s[len(s)-1]
	}
	return rank(s, 0.25), rank(s, 0.75)
}

// spread is the width of v's noise band.
func (v *Values) spread() float64 {
	lo, hi := v.Band()
	return hi - lo
}

// rank is the q-quantile of sorted by the nearest rank.
func rank(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
