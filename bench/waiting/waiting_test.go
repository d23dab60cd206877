package waiting

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	ServePeer() // the echo child of the cross-process tests
	os.Exit(m.Run())
}

// BenchmarkShapes runs each mode on each shape for the benchmark time
// (one run per iteration) and reports the section's figures as metrics:
// go test -bench Shapes/tidal -benchtime 3x ./bench/waiting
func BenchmarkShapes(b *testing.B) {
	dur := time.Second
	for _, sh := range Shapes {
		for _, mode := range Modes {
			b.Run(sh.Name+"/"+mode, func(b *testing.B) {
				var runs []measurement
				for i := range b.N {
					m, err := measure(mode, sh, dur, uint64(i+1))
					if err != nil {
						b.Fatal(err)
					}
					runs = append(runs, m)
				}
				c := summarize(mode, sh.Name, runs)
				b.ReportMetric(c.P50, "p50-us")
				b.ReportMetric(c.P99, "p99-us")
				b.ReportMetric(c.CPUPerMsg, "cpu-us/msg")
				b.ReportMetric(c.SleepsPerMsg, "sleeps/msg")
				b.ReportMetric(c.RingsPerMsg, "rings/msg")
				b.ReportMetric(c.Switches, "switches/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkIdle measures an idle connection's CPU per mode (1 s a run).
func BenchmarkIdle(b *testing.B) {
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) {
			var runs []measurement
			for range b.N {
				m, err := measureIdle(mode, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				runs = append(runs, m)
			}
			c := summarizeIdle(mode, runs)
			b.ReportMetric(c.CPUPercent, "cpu-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}
