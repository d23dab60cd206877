package plots

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// tidyTicks are plot.DefaultTicks labelled without trailing zeros.
type tidyTicks struct{}

// Ticks implements plot.Ticker.
func (tidyTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// logTicks label 1, 2 and 5 times each power of ten in range, with
// unlabelled minor ticks at the other integers times it.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	if min <= 0 || max <= min {
		return ts
	}
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		p := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * p
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// headroom raises the y axis so that a top legend of n entries clears
// the data, and starts a linear axis of non-negative data at 0.
func headroom(p *plot.Plot, n int, logY bool) {
	frac := min(0.6, float64(n)*0.05) // an entry is about 5% of the height
	if logY {
		lo, hi := math.Log10(p.Y.Min), math.Log10(p.Y.Max)
		p.Y.Max = math.Pow(10, lo+(hi-lo)/(1-frac))
		return
	}
	if p.Y.Min >= 0 {
		p.Y.Min = 0
	}
	p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)/(1-frac)
}
