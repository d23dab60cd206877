// Package results is the result model of `sdpshim bench`: every figure a
// section measures (its repeats, their median, the paper's value and
// the target where there is one), the machine and build it was measured
// on, and the rule that judges a change between two runs.
//
// A section fills a Recorder while it prints its tables; the CLI wraps
// the recorded figures in a Run, writes it as JSON (WriteFile, Read) and
// draws the section's Plots (package bench/plots). Figures are grouped
// by Figure.Group; each Plot draws one group. Compare matches two Runs
// figure by figure and says, from the repeats, whether a change is
// larger than the noise.
//
// The package holds data and rules only: no measuring, no drawing.
package results
