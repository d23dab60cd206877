package results

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Run is one `sdpshim bench` invocation: what was measured, on what,
// with what.
type Run struct {
	// Date is when the run started.
	Date time.Time `json:"date"`
	// Machine is where it ran.
	Machine Machine `json:"machine"`
	// Version and Commit identify the sdpshim build (Build).
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Settings are the command line and environment that shaped it.
	Settings Settings `json:"settings"`
	// Sections are the sections run, in order.
	Sections []SectionRun `json:"sections"`
	// Figures are every section's figures, in the order measured.
	Figures []Figure `json:"figures"`
}

// Settings are what the figures depend on besides the machine.
type Settings struct {
	// Quick is true for a --quick (smoke) run: figures are indicative.
	Quick bool `json:"quick"`
	// Sections named on the command line; empty for all.
	Sections []string `json:"sections,omitempty"`
	// Env holds every SDPSHIM_* variable set in the environment.
	Env map[string]string `json:"env,omitempty"`
	// GOMAXPROCS of the bench process.
	GOMAXPROCS int `json:"gomaxprocs"`
}

// SectionRun is how one section went.
type SectionRun struct {
	Name    string  `json:"name"`    // the section, as `sdpshim bench` names it
	Seconds float64 `json:"seconds"` // how long it ran
	// Error is why the section could not measure everything; "" when
	// it could.
	Error string `json:"error,omitempty"`
}

// Add appends a section's outcome and its recorded figures.
func (r *Run) Add(s SectionRun, rec *Recorder) {
	r.Sections = append(r.Sections, s)
	r.Figures = append(r.Figures, rec.Figures()...)
}

// Group returns the figures of section drawn in group, in order.
func (r *Run) Group(section, group string) []Figure {
	var out []Figure
	for _, f := range r.Figures {
		if f.Section == section && f.Group == group {
			out = append(out, f)
		}
	}
	return out
}

// Encode writes r to w as indented JSON.
func (r *Run) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFile writes r as JSON to path.
func (r *Run) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.Encode(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads a Run written by WriteFile.
func Read(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
