package seed001

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sdpshim/sdpshim/bench/results"
)

// median returns the middle of xs (the mean of the two middle ones for
// an even count); 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// ratio returns a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// target is one of issue 3's seed-001 targets, judged on a measured
// ratio: met when the ratio is at least min (or at most max, when max is
// non-zero).
type target struct {
	what     string
	min, max float64
}

// judge returns the target's line for value.
func (t target) judge(value float64) string {
	r := t.of(value)
	verdict := "NOT MET"
	if r.Met {
		verdict = "met"
	}
	return fmt.Sprintf("target: %s %s: %.2fx, %s", t.what, r.Text, value, verdict)
}

// of returns the target's bound and whether value meets it.
func (t target) of(value float64) *results.Target {
	if t.max > 0 {
		return &results.Target{Text: fmt.Sprintf("<= %gx", t.max), Met: value <= t.max}
	}
	return &results.Target{Text: fmt.Sprintf(">= %gx", t.min), Met: value >= t.min}
}

// report is one printed table: a title, a header, rows and notes under
// it, columns aligned by text/tabwriter (numbers right-aligned).
type report struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

// add appends a row of cells.
func (r *report) add(cells ...string) { r.rows = append(r.rows, cells) }

// notef appends a note line.
func (r *report) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// print writes the report to w.
func (r *report) print(w io.Writer) error {
	if _, err := fmt.Fprintln(w, r.title); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range append([][]string{r.head}, r.rows...) {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.notes {
		if _, err := fmt.Fprintln(w, "  "+n); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// Formatting helpers for cells.
func fmtMBps(v float64) string  { return fmt.Sprintf("%.0f", v) }
func fmtRatio(v float64) string { return fmt.Sprintf("%.2fx", v) }
func fmtPct(v float64) string   { return fmt.Sprintf("%.0f%%", 100*v) }
func fmtMs(v float64) string    { return fmt.Sprintf("%.2f", v) }

// sizeName spells a byte count as the paper's axis does (256 B, 4 KiB).
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
