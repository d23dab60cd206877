package programs

import (
	"strings"

	"github.com/sdpshim/sdpshim/bench/results"
)

// Plots are the section's pictures of its recorded figures.
var Plots = []results.Plot{
	{Group: "ratio", Title: "unmodified programs, sdpshim against kernel TCP (medians)",
		XLabel: "sdpshim's advantage (throughput s/k, time k/s)", Kind: results.RatioBars},
}

// record adds each row of the table that was measured to rec: the
// programs' figures in the ratio plot, the costs of the preload beside
// them.
func record(rec *results.Recorder, vals map[string][2][]float64) {
	for _, r := range rows {
		x, ok := vals[r.key]
		if !ok {
			continue
		}
		f := results.Figure{Name: r.label, Unit: r.unit, Higher: r.higher, Category: r.label,
			Kernel: values(x[kernel]), Shim: values(x[shimmed])}
		switch {
		case strings.HasPrefix(r.key, "cost."):
			// Counts per message (some 0 on one side): in the file and
			// the table, not among the ratios.
		case !r.absolute && !strings.HasPrefix(r.key, "pass.") && !strings.HasPrefix(r.key, "start."):
			f.Group = "ratio"
		}
		if r.judge != nil && f.Shim != nil && (f.Kernel != nil || r.absolute) {
			k := 0.0
			if f.Kernel != nil {
				k = f.Kernel.Median
			}
			f.Target = &results.Target{Text: r.target, Met: r.judge(k, f.Shim.Median)}
		}
		rec.Add(f)
	}
}

// values returns the repeats and their median, nil for none.
func values(v []float64) *results.Values {
	m, ok := median(v)
	if !ok {
		return nil
	}
	return results.Of(v, m)
}
