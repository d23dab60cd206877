package programs

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{3}, 3, true},
		{[]float64{5, 1, 3}, 3, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
	} {
		got, ok := median(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("median(%v) = %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The table: ratios in sdpshim's favour, targets judged, a figure
// missing in one mode shown as failed.
func TestWriteTable(t *testing.T) {
	var b strings.Builder
	writeTable(&b, map[string][2][]float64{
		"iperf.gbps":    {{10, 12, 11}, {70, 60, 80}},       // 7x: met
		"pp64.avg":      {{20}, {2}},                        // 2 us: not met
		"redis.c50.GET": {{40000}, nil},                     // sdpshim failed
		"pass.ns":       {{300, 310, 305}, {303, 309, 308}}, // +3 ns: met
	}, 3)
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"iperf3 throughput, 64 KiB writes Gbit/s 11.00 70.00 6.36x >= 6x yes",
		"64 B half-RTT avg us 20.00 2.00 10.00x <= 1 us NO",
		"redis-benchmark -c 50 GET req/s 40000 failed",
		"median of 3 repeat(s)",
		"ns/call 305.0 308.0 0.99x <= +5 ns yes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// The pods' comparison takes the pair whose ratio is the median of the
// repeats' ratios, and each one's median when the repeats do not pair.
func TestPairedMedians(t *testing.T) {
	for _, c := range []struct {
		a, b        []float64
		higher      bool
		across, one float64
		ok          bool
	}{
		// this morning's latencies: ratios 1.26, 0.98, 2.26 -> 1.26
		{[]float64{0.226, 0.18, 0.635}, []float64{0.18, 0.183, 0.281}, false, 0.226, 0.18, true},
		// throughput, higher is better: worse 1.25, 0.5, 1.0 -> 1.0
		{[]float64{80, 200, 100}, []float64{100, 100, 100}, true, 100, 100, true},
		// even count: the better of the two middle pairs
		{[]float64{1, 2, 3, 4}, []float64{1, 1, 1, 1}, false, 2, 1, true},
		// unpaired: each one's median
		{[]float64{1, 3, 5}, []float64{2, 4}, false, 3, 3, true},
		{[]float64{1, 0}, []float64{1, 1}, false, 0, 0, false},
		{nil, nil, false, 0, 0, false},
	} {
		across, one, ok := pairedMedians(c.a, c.b, c.higher)
		if across != c.across || one != c.one || ok != c.ok {
			t.Errorf("pairedMedians(%v, %v, %v) = %v %v %v, want %v %v %v", c.a, c.b, c.higher, across, one, ok, c.across, c.one, c.ok)
		}
	}
}
