package programs

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// camReport is an analytics report: camStreams streams of frames frames,
// frame k of stream s late by lat(s, k) ns, and bins of the given bytes.
func camReport(frames int, lat func(s, k int) int, bins []int) string {
	var b strings.Builder
	for s := 0; s < camStreams; s++ {
		for k := 0; k < frames; k++ {
			fmt.Fprintf(&b, "lat %d\n", lat(s, k))
		}
	}
	for i, n := range bins {
		fmt.Fprintf(&b, "bin %d %d\n", i, n)
	}
	fmt.Fprintf(&b, "frames %d\n", camStreams*frames)
	return b.String()
}

// TestCamFigures: throughput is the mean of the whole bins of the
// sending time (a trailing bin after it is not counted), its CV theirs,
// and each stream's first frame is left out of the latencies.
func TestCamFigures(t *testing.T) {
	const frames = 26
	bins := make([]int, 11) // 1 s of 100 ms bins, then one more
	for i := range bins {
		bins[i] = 27_648_000 // 276.48 MB/s
		if i%2 == 1 {
			bins[i] = 2 * 27_648_000
		}
	}
	bins[10] = 1 // after the sending time
	lat := func(s, k int) int {
		if k == 0 {
			return 1e9 // a cold first frame
		}
		return (s*frames + k) * 1000 // distinct, in us: s*26+k
	}
	got, err := camFigures(camReport(frames, lat, bins), frames, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Ten bins, half at 276.48 and half at 552.96 MB/s.
	wantMean := 1.5 * 276.48
	wantCV := math.Sqrt(10.0/9*0.25*276.48*276.48) / wantMean
	// 12*25 latencies, sorted: 1..25, 27..51, ...; nearest ranks 150 and 297.
	var lats []float64
	for s := 0; s < camStreams; s++ {
		for k := 1; k < frames; k++ {
			lats = append(lats, float64(s*frames+k))
		}
	}
	want := map[string]float64{"mbps": wantMean, "cv": wantCV, "p50": lats[len(lats)/2], "p99": lats[len(lats)*99/100]}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9*math.Abs(w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if got["p99"] >= 1e6 {
		t.Errorf("p99 %v us counts a first frame", got["p99"])
	}

	// A report short of a frame, or of the sending time's bins, is an error.
	if _, err := camFigures(camReport(frames-1, lat, bins), frames, 1); err == nil {
		t.Error("a report short of frames passed")
	}
	if _, err := camFigures(camReport(frames, lat, bins[:9]), frames, 1); err == nil {
		t.Error("a report short of bins passed")
	}
}
