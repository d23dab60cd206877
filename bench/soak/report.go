package soak

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sdpshim/sdpshim/bench/results"
)

// Plots are the section's pictures: the server's RSS and fd curves of
// both columns.
var Plots = []results.Plot{
	{Group: "rss", Title: "server RSS over time", XLabel: "seconds", YLabel: "MiB", Kind: results.Lines},
	{Group: "fds", Title: "server fds over time", XLabel: "seconds", YLabel: "open fds", Kind: results.Lines},
}

// maxRows is how many samples of the curves the table prints (and the
// figures keep), the first and the last among them.
const maxRows = 21

// rows returns the indexes of the samples printed for curves of n
// samples.
func rows(n int) []int {
	if n == 0 {
		return nil
	}
	step := max(1, (n-1+maxRows-2)/(maxRows-1))
	var out []int
	for i := 0; i < n-1; i += step {
		out = append(out, i)
	}
	return append(out, n-1)
}

func mib(kb int) float64 { return float64(kb) / 1024 }

// writeTable writes the curves, the counts and the summary line.
func writeTable(w io.Writer, d time.Duration, cols []*column) {
	fmt.Fprintf(w, "Checksummed soak (csrc/soak.c), %v per column, kernel TCP then sdpshim with the same seeds: one server process; "+
		"one client process for the whole run (%d connections at a time) and %d lanes of short-lived ones (1-%d connections, %d at a time); "+
		"random messages both ways, 1-8 MiB writes among small ones, half-closes; a connection that moves nothing for %v is a hang\n",
		d, longParallel, shortLanes, shortConns, shortParallel, stall)
	fmt.Fprintf(w, "%d CPUs (other processes share them); the server sampled every %v\n\n", runtime.NumCPU(), interval(d))
	n := 0
	for _, c := range cols {
		n = max(n, len(c.curve))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "server\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s RSS MiB\tfds\t", c.name)
	}
	fmt.Fprintln(tw)
	for _, i := range rows(n) {
		fmt.Fprintf(tw, "%v\t", time.Duration(i)*interval(d)) // both columns sample at these times
		for _, c := range cols {
			if i < len(c.curve) {
				fmt.Fprintf(tw, "%.1f\t%d\t", mib(c.curve[i].rssKB), c.curve[i].fds)
			} else {
				fmt.Fprint(tw, "-\t-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.name)
	}
	fmt.Fprintln(tw)
	line := func(what string, f func(c *column) string) {
		fmt.Fprintf(tw, "%s\t", what)
		for _, c := range cols {
			if c.err != nil {
				fmt.Fprint(tw, "failed\t")
				continue
			}
			fmt.Fprintf(tw, "%s\t", f(c))
		}
		fmt.Fprintln(tw)
	}
	line("client processes", func(c *column) string { return fmt.Sprint(c.procs) })
	line("connections (completed)", func(c *column) string { return fmt.Sprintf("%d (%d)", c.clients.Conns, c.clients.Completed) })
	line("bytes moved, both ways", func(c *column) string { return fmt.Sprintf("%.2f GB", c.moved()/1e9) })
	line("mismatches", func(c *column) string { return fmt.Sprint(c.mismatches()) })
	line("hangs", func(c *column) string { return fmt.Sprint(c.hangs()) })
	line("errors", func(c *column) string { return fmt.Sprint(c.errors()) })
	line("fallbacks", fallbackText)
	line("server RSS MiB: start, end, most", func(c *column) string {
		return fmt.Sprintf("%.1f, %.1f, %.1f", mib(c.start.rssKB), mib(c.end.rssKB), mib(c.most.rssKB))
	})
	line("server fds: start, end, most", func(c *column) string {
		return fmt.Sprintf("%d, %d, %d", c.start.fds, c.end.fds, c.most.fds)
	})
	tw.Flush()
	fmt.Fprintln(w, summary(d, cols))
	for _, c := range cols {
		if c.err != nil {
			fmt.Fprintf(w, "note: %s: %v\n", c.name, c.err)
		}
		for i, n := range c.notes {
			if i == 20 {
				fmt.Fprintf(w, "note: %s: and %d more\n", c.name, len(c.notes)-i)
				break
			}
			fmt.Fprintf(w, "note: %s: %s\n", c.name, n)
		}
	}
}

// moved is the bytes the clients wrote and read.
func (c *column) moved() float64 { return float64(c.clients.BytesOut + c.clients.BytesIn) }

func fallbackText(c *column) string {
	switch {
	case !c.shim:
		return "-"
	case c.fallbacks < 0:
		return "unknown"
	case len(c.reasons) > 0:
		return fmt.Sprintf("%d (%s)", c.fallbacks, strings.Join(c.reasons, ", "))
	}
	return fmt.Sprint(c.fallbacks)
}

// summary is one line per run: each column's problems and the server's
// RSS and fds from start to end.
func summary(d time.Duration, cols []*column) string {
	var parts []string
	for _, c := range cols {
		if c.err != nil {
			parts = append(parts, fmt.Sprintf("%s failed", c.name))
			continue
		}
		fb := ""
		if c.shim {
			fb = ", " + fallbackText(c) + " fallbacks"
		}
		parts = append(parts, fmt.Sprintf("%s: %d mismatches, %d hangs, %d errors%s in %d connections (%d client processes); server RSS %.1f -> %.1f MiB, fds %d -> %d",
			c.name, c.mismatches(), c.hangs(), c.errors(), fb, c.clients.Conns, c.procs, mib(c.start.rssKB), mib(c.end.rssKB), c.start.fds, c.end.fds))
	}
	return fmt.Sprintf("soak %v: %s", d, strings.Join(parts, "; "))
}

// record adds the figures of both columns: the counts and the server's
// usage (kernel TCP's beside sdpshim's), the curves (one series per
// column, the value in the figure's sdpshim field, where a line plot
// draws it) and the targets, judged on the sdpshim column.
func record(rec *results.Recorder, d time.Duration, cols []*column) {
	var kernel, shim *column
	for _, c := range cols {
		if c.err != nil {
			continue
		}
		if c.shim {
			shim = c
		} else {
			kernel = c
		}
	}
	rec.Add(results.Figure{Name: "duration per column", Unit: "s", Shim: results.One(d.Seconds())})
	both := func(name, unit string, higher bool, f func(c *column) float64) {
		fig := results.Figure{Name: name, Unit: unit, Higher: higher}
		if kernel != nil {
			fig.Kernel = results.One(f(kernel))
		}
		if shim != nil {
			fig.Shim = results.One(f(shim))
		}
		rec.Add(fig)
	}
	both("client processes", "", true, func(c *column) float64 { return float64(c.procs) })
	both("connections", "", true, func(c *column) float64 { return float64(c.clients.Conns) })
	both("connections completed", "", true, func(c *column) float64 { return float64(c.clients.Completed) })
	both("bytes moved", "GB", true, func(c *column) float64 { return c.moved() / 1e9 })
	both("mismatches", "", false, func(c *column) float64 { return float64(c.mismatches()) })
	both("hangs", "", false, func(c *column) float64 { return float64(c.hangs()) })
	both("errors", "", false, func(c *column) float64 { return float64(c.errors()) })
	both("server RSS at the start", "MiB", false, func(c *column) float64 { return mib(c.start.rssKB) })
	both("server RSS at the end", "MiB", false, func(c *column) float64 { return mib(c.end.rssKB) })
	both("server RSS, most", "MiB", false, func(c *column) float64 { return mib(c.most.rssKB) })
	both("server fds at the start", "", false, func(c *column) float64 { return float64(c.start.fds) })
	both("server fds at the end", "", false, func(c *column) float64 { return float64(c.end.fds) })
	both("server fds, most", "", false, func(c *column) float64 { return float64(c.most.fds) })
	for _, c := range []*column{kernel, shim} {
		if c == nil {
			continue
		}
		for _, i := range rows(len(c.curve)) {
			p := c.curve[i]
			at := p.t.Seconds()
			rec.Add(results.Figure{Name: fmt.Sprintf("server RSS at %g s, %s", at, c.name), Unit: "MiB", Group: "rss",
				Series: c.name, X: at, Shim: results.One(mib(p.rssKB))})
			rec.Add(results.Figure{Name: fmt.Sprintf("server fds at %g s, %s", at, c.name), Unit: "", Group: "fds",
				Series: c.name, X: at, Shim: results.One(float64(p.fds))})
		}
	}
	if shim == nil {
		return
	}
	rec.Add(results.Figure{Name: "fallbacks", Unit: "", Shim: results.One(float64(shim.fallbacks))})
	rec.Add(results.Figure{Name: "server connections accelerated", Unit: "", Higher: true, Shim: results.One(float64(shim.accelerated))})
	rec.Add(results.Figure{Name: "server connections pulled (deferred)", Unit: "", Higher: true, Shim: results.One(float64(shim.pulled))})
	target := func(text string, met bool) {
		rec.Add(results.Figure{Name: "target: " + text, Target: &results.Target{Text: text, Met: met}})
	}
	target("no mismatch, hang, error or fallback under sdpshim", shim.clean())
	target(fmt.Sprintf("server fds at the end within %d of the start", fdSlack), shim.end.fds-shim.start.fds <= fdSlack)
	if kernel != nil {
		target("server RSS at the end within 1.5x kernel TCP's", float64(shim.end.rssKB) <= 1.5*float64(kernel.end.rssKB))
	}
	if n := len(shim.curve); n >= 10 {
		target("server RSS flat after warm-up: at the end at most 1.1x its value a tenth into the run",
			float64(shim.end.rssKB) <= 1.1*float64(shim.curve[n/10].rssKB))
	}
}
