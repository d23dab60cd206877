package plots

import (
	"math"
	"slices"
	"strconv"

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
// over kernel TCP on a log2 axis, so that 2x better and 2x worse are bars
// of one length either side of the line at 1x (no difference).
func ratioBars(p *plot.Plot, figs []results.Figure) error {
	var names []string
	var vals plotter.Values
	lo, hi := 0.0, 0.0
	for _, f := range figs {
		if r, ok := f.Advantage(); ok && r > 0 && !math.IsInf(r, 0) {
			names = append(names, f.Category)
			v := math.Log2(r)
			vals = append(vals, v)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
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
	one, err := plotter.NewLine(plotter.XYs{{X: 0, Y: -0.5}, {X: 0, Y: float64(len(vals)) - 0.5}})
	if err != nil {
		return err
	}
	one.Color, one.Dashes = plotutil.Color(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.NominalY(names...)
	p.X.Min, p.X.Max = math.Floor(lo)-0.5, math.Ceil(hi)+0.5
	p.X.Tick.Marker = log2Ticks{}
	return nil
}

// log2Ticks labels a log2 axis with the ratios: 0.25x, 0.5x, 1x, 2x, ...
type log2Ticks struct{}

func (log2Ticks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	step := math.Max(1, math.Ceil((max-min)/8))
	for k := math.Ceil(min/step) * step; k <= max; k += step {
		ts = append(ts, plot.Tick{Value: k, Label: strconv.FormatFloat(math.Exp2(k), 'g', 3, 64) + "x"})
	}
	return ts
}

// grid returns the background grid.
func grid() *plotter.Grid { return plotter.NewGrid() }
