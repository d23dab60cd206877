package seed000

import (
	"fmt"
	"io"
	"strings"
)

// table is a text table: a title, a header row and rows of cells, printed
// with every column as wide as its widest cell, the first left-aligned
// and the others right-aligned.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func newTable(title string, head ...string) *table { return &table{title: title, head: head} }

// row adds a row; cells are formatted with fmt.Sprint, floats by the
// caller.
func (t *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, r)
}

// note adds a line printed under the table.
func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// write prints the table to w.
func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for _, r := range append([][]string{t.head}, t.rows...) {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "%*s", width[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if t.title != "" {
		fmt.Fprintln(w, t.title)
	}
	line(t.head)
	for _, r := range t.rows {
		line(r)
	}
	for _, n := range t.notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintln(w)
}

// f formats a figure with prec decimals, "-" for a missing one (negative).
func f(x float64, prec int) string {
	if x < 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// times formats a ratio as "4.6x", "-" for a missing one (negative).
func times(x float64) string {
	if x < 0 {
		return "-"
	}
	return f(x, 1) + "x"
}

// verdict says whether got meets want ("met" / "NOT met").
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// sizeName prints a byte count as B, KiB or MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
