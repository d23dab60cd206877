package seed000

import (
	"math"
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of xs by the nearest rank, 0 for
// none. xs is not modified.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// median is the 0.5-quantile.
func median(xs []float64) float64 { return quantile(xs, 0.5) }

// meanStd returns the mean and the population standard deviation.
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

// cv is the coefficient of variation (std / mean), 0 when the mean is.
func cv(xs []float64) float64 {
	m, s := meanStd(xs)
	if m == 0 {
		return 0
	}
	return s / m
}

// micros converts durations to microseconds.
func micros(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Microsecond)
	}
	return out
}

// binRates converts bytes per bin of width bin to MB/s (10^6 bytes).
func binRates(bins []int64, bin time.Duration) []float64 {
	out := make([]float64, len(bins))
	for i, b := range bins {
		out[i] = float64(b) / bin.Seconds() / 1e6
	}
	return out
}

// binAdd adds n bytes at time t (ns since the start) to bins of width bin,
// ignoring times outside them.
func binAdd(bins []int64, t, bin int64, n int64) {
	if t < 0 {
		return
	}
	if i := t / bin; i < int64(len(bins)) {
		bins[i] += n
	}
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// medianBy returns the run whose key is the median of the runs' keys (the
// lower middle one of an even count); runs must not be empty.
func medianBy[T any](runs []T, key func(T) float64) T {
	keys := make([]float64, len(runs))
	for i, r := range runs {
		keys[i] = key(r)
	}
	m := median(keys)
	for i, r := range runs {
		if keys[i] == m {
			return r
		}
	}
	return runs[0]
}
