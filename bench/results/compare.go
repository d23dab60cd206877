package results

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// Verdicts of a Change.
const (
	Better   = "better"
	Worse    = "worse"
	Noise    = "noise"
	NoRepeat = "one repeat" // a run has fewer than two repeats: no noise estimate
	Missing  = "missing"    // measured in one run only
)

// Change is one figure's difference between two runs.
type Change struct {
	Section, Name, Unit string
	// Kernel is true for kernel TCP's values of the figure.
	Kernel   bool
	Old, New float64 // medians
	// Percent is (New - Old) / Old * 100; NaN when Old is 0.
	Percent float64
	// Verdict is Better, Worse, Noise, NoRepeat or Missing.
	Verdict string
}

// MinChange is the smallest change, relative to the old median, that
// Judge can call significant: below it a change is noise however tight
// the repeats (a figure such as a utilisation that barely varies).
const MinChange = 0.01

// Judge applies the noise rule to one figure's values in two runs. A
// run's spread is the width of its Band: the range (max - min) of its
// repeats, or their interquartile range when it has five or more. The
// change is significant when the medians differ by more than the larger
// of the two spreads and by more than MinChange of the old median;
// otherwise it is noise. With fewer than two repeats in either run there
// is no spread to judge by (NoRepeat).
func Judge(old, new *Values, higher bool) string {
	if old == nil || new == nil {
		return Missing
	}
	if len(old.Repeats) < 2 || len(new.Repeats) < 2 {
		return NoRepeat
	}
	d := new.Median - old.Median
	if math.Abs(d) <= max(old.spread(), new.spread(), MinChange*math.Abs(old.Median)) {
		return Noise
	}
	if (d > 0) == higher {
		return Better
	}
	return Worse
}

// Compare matches the figures of two runs by section and name, in the
// new run's order (then those only in the old one), and judges each
// change, sdpshim's values and, where both runs measured them, kernel
// TCP's.
func Compare(old, new *Run) []Change {
	key := func(f Figure) string { return f.Section + "\x00" + f.Name }
	olds := map[string]Figure{}
	for _, f := range old.Figures {
		olds[key(f)] = f
	}
	var out []Change
	seen := map[string]bool{}
	for _, n := range new.Figures {
		o, ok := olds[key(n)]
		seen[key(n)] = true
		if !ok {
			out = append(out, change(n, nil, n.Shim, false))
			continue
		}
		out = append(out, change(n, o.Shim, n.Shim, false))
		if o.Kernel != nil && n.Kernel != nil {
			out = append(out, change(n, o.Kernel, n.Kernel, true))
		}
	}
	for _, o := range old.Figures {
		if !seen[key(o)] {
			out = append(out, change(o, o.Shim, nil, false))
		}
	}
	return out
}

func change(f Figure, old, new *Values, kernel bool) Change {
	c := Change{Section: f.Section, Name: f.Name, Unit: f.Unit, Kernel: kernel,
		Old: math.NaN(), New: math.NaN(), Percent: math.NaN(), Verdict: Judge(old, new, f.Higher)}
	if old != nil {
		c.Old = old.Median
	}
	if new != nil {
		c.New = new.Median
	}
	if old != nil && new != nil && old.Median != 0 {
		c.Percent = (new.Median - old.Median) / math.Abs(old.Median) * 100
	}
	return c
}

// WriteChanges prints changes as a table, one figure per line.
func WriteChanges(w io.Writer, changes []Change) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\tfigure\tunit\told\tnew\tchange\tverdict")
	for _, c := range changes {
		name := c.Name
		if c.Kernel {
			name += " (kernel TCP)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Section, name, c.Unit, num(c.Old), num(c.New), pct(c.Percent), c.Verdict)
	}
	return tw.Flush()
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.4g", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", v)
}
