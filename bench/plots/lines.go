package plots

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sdpshim/sdpshim/bench/results"
)

// lines draws one line per series through the sdpshim medians, error
// bars over each point's noise band (results.Values.Band), and the paper's values as large
// crosses in the series' colour.
func lines(p *plot.Plot, pl results.Plot, figs []results.Figure) error {
	entries := 0
	if pl.LogX {
		p.X.Scale = plot.LogScale{}
	}
	if pl.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	if pl.XBytes || pl.LogX {
		p.X.Tick.Marker = xTicks(figs, pl.XBytes)
	}
	for i, series := range seriesOf(figs) {
		c := plotutil.Color(i)
		var pts, paper plotter.XYs
		var errs plotter.YErrors
		for _, f := range figs {
			if f.Series != series || !usable(pl, f.X) {
				continue
			}
			if f.Shim != nil && usable(pl, f.Shim.Median) {
				lo, hi := f.Shim.Band()
				lo, hi = min(lo, f.Shim.Median), max(hi, f.Shim.Median)
				pts = append(pts, plotter.XY{X: f.X, Y: f.Shim.Median})
				errs = append(errs, struct{ Low, High float64 }{f.Shim.Median - lo, hi - f.Shim.Median})
			}
			if f.Paper != nil && usable(pl, *f.Paper) {
				paper = append(paper, plotter.XY{X: f.X, Y: *f.Paper})
			}
		}
		if len(pts) > 0 {
			if err := addLine(p, series, pts, errs, c, i, pl.LogY); err != nil {
				return err
			}
			entries++
		}
		if len(paper) > 0 {
			s, err := plotter.NewScatter(paper)
			if err != nil {
				return err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(5), Shape: draw.CrossGlyph{}}
			p.Add(s)
			p.Legend.Add("paper: "+series, s)
			entries++
		}
	}
	if entries > 0 {
		headroom(p, entries, pl.LogY)
	}
	return nil
}

// addLine adds a line with points and, when any repeat differs from
// the median, its error bars (not on a log axis, where a bar may reach
// zero).
func addLine(p *plot.Plot, name string, pts plotter.XYs, errs plotter.YErrors, c color.Color, i int, logY bool) error {
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, s.Color = c, c
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	if logY || !spread(errs) {
		return nil
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{pts, errs})
	if err != nil {
		return err
	}
	eb.Color = c
	p.Add(eb)
	return nil
}

// seriesOf returns the figures' series in order of appearance.
func seriesOf(figs []results.Figure) []string {
	var out []string
	for _, f := range figs {
		if !slices.Contains(out, f.Series) {
			out = append(out, f.Series)
		}
	}
	return out
}

// usable is false for a value a log axis cannot show.
func usable(pl results.Plot, v float64) bool { return v > 0 || !(pl.LogX || pl.LogY) }

func spread(errs plotter.YErrors) bool {
	for _, e := range errs {
		if e.Low > 0 || e.High > 0 {
			return true
		}
	}
	return false
}

// xTicks marks each distinct x value of figs, as a byte count when
// bytes is set.
func xTicks(figs []results.Figure, bytes bool) plot.ConstantTicks {
	var xs []float64
	for _, f := range figs {
		if !slices.Contains(xs, f.X) {
			xs = append(xs, f.X)
		}
	}
	slices.Sort(xs)
	ticks := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: fmt.Sprintf("%g", x)}
		if bytes {
			ticks[i].Label = byteLabel(x)
		}
	}
	return ticks
}

// byteLabel spells n bytes as 256, 4K or 8M.
func byteLabel(n float64) string {
	v := int64(n)
	switch {
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%dM", v>>20)
	case v >= 1<<10 && v%(1<<10) == 0:
		return fmt.Sprintf("%dK", v>>10)
	}
	return fmt.Sprintf("%d", v)
}
