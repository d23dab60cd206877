package plots

import (
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/sdpshim/sdpshim/bench/results"
)

// bars draws, per category, one bar per series (the sdpshim median),
// side by side.
func bars(p *plot.Plot, figs []results.Figure) error {
	var cats []string
	for _, f := range figs {
		if !slices.Contains(cats, f.Category) {
			cats = append(cats, f.Category)
		}
	}
	series := seriesOf(figs)
	w := vg.Points(min(60/float64(len(series)), 14))
	for i, s := range series {
		vals := make(plotter.Values, len(cats))
		for _, f := range figs {
			if f.Series == s && f.Shim != nil {
				vals[slices.Index(cats, f.Category)] = f.Shim.Median
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(i), 0
		b.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(b)
		p.Legend.Add(s, b)
	}
	p.NominalX(cats...)
	headroom(p, len(series), false)
	return nil
}

// ratioBars draws one horizontal bar per category: sdpshim's advantage
// over kernel TCP, with a line at 1 (no difference).
func ratioBars(p *plot.Plot, figs []results.Figure) error {
	var names []string
	var vals plotter.Values
	for _, f := range figs {
		if r, ok := f.Advantage(); ok {
			names = append(names, f.Category)
			vals = append(vals, r)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	b, err := plotter.NewBarChart(vals, vg.Points(12))
	if err != nil {
		return err
	}
	b.Horizontal, b.Color, b.LineStyle.Width = true, plotutil.Color(0), 0
	p.Add(b)
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(vals)) - 0.5}})
	if err != nil {
		return err
	}
	one.Color, one.Dashes = plotutil.Color(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.NominalY(names...)
	p.X.Min = 0
	return nil
}

// grid returns the background grid.
func grid() *plotter.Grid { return plotter.NewGrid() }
