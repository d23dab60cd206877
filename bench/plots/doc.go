// Package plots draws the Plots of a bench results.Run as PNG files with
// gonum.org/v1/plot: line plots of a figure against message size or
// block count (the repeats' range as error bars, the seed paper's values
// as separate marks labelled "paper"), grouped bars per category, and
// kernel TCP against sdpshim as ratio bars. Every plot's caption names
// the machine and the date of the run.
package plots
