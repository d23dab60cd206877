package plots

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/sdpshim/sdpshim/bench/results"
)

// Size of every picture: 576 x 384 pixels at the PNG default of 96 dpi.
const (
	width  = 6 * vg.Inch
	height = 4 * vg.Inch
)

// Draw draws each of section's plots whose group has figures in run, as
// DIR/SECTION-GROUP.png, and returns the files written.
func Draw(run *results.Run, section string, plots []results.Plot, dir string) ([]string, error) {
	var files []string
	for _, pl := range plots {
		figs := run.Group(section, pl.Group)
		if len(figs) == 0 {
			continue
		}
		p, err := build(run, section, pl, figs)
		if err != nil {
			return files, fmt.Errorf("plot %s-%s: %w", section, pl.Group, err)
		}
		path := filepath.Join(dir, section+"-"+pl.Group+".png")
		if err := p.Save(width, height, path); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// build builds one plot: the axes and caption, then the data by kind.
func build(run *results.Run, section string, pl results.Plot, figs []results.Figure) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s\n%s, %s", section, pl.Title, run.Machine, run.Date.Format("2006-01-02"))
	if run.Settings.Quick {
		p.Title.Text += " (--quick: indicative)"
	}
	p.X.Label.Text, p.Y.Label.Text = pl.XLabel, pl.YLabel
	p.Legend.Top = true
	p.X.Tick.Marker, p.Y.Tick.Marker = tidyTicks{}, tidyTicks{}
	p.Add(grid())
	var err error
	switch pl.Kind {
	case results.Lines:
		err = lines(p, pl, figs)
	case results.Bars:
		err = bars(p, figs)
	case results.RatioBars:
		err = ratioBars(p, figs)
	default:
		err = fmt.Errorf("unknown plot kind %d", pl.Kind)
	}
	return p, err
}

// Save is a helper for callers that only want the files: it draws every
// plot of every section named in plots, skipping sections without figures.
func Save(run *results.Run, plots map[string][]results.Plot, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, s := range run.Sections {
		got, err := Draw(run, s.Name, plots[s.Name], dir)
		files = append(files, got...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
