package seed001

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

// The benchmarks run each measurement with b.N as its size (writes,
// bursts) and report the section's figure as a metric:
//
//	go test ./bench/seed001 -run '^$' -bench . -benchtime 2000x

func TestMain(m *testing.M) {
	ServePeer()
	os.Exit(m.Run())
}

func TestMedianAndRatio(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.xs...)
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Errorf("median reordered its input: %v", c.xs)
			}
		}
	}
	if ratio(1, 0) != 0 || ratio(9, 3) != 3 {
		t.Error("ratio")
	}
	for n, want := range map[int]string{256: "256 B", 1 << 10: "1 KiB", 64 << 10: "64 KiB", 1 << 20: "1 MiB", 1500: "1500 B"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTargetJudge(t *testing.T) {
	for _, c := range []struct {
		t     target
		v     float64
		ratio string
		met   bool
	}{
		{target{what: "x", min: 8}, 12.5, "12.50x", true},
		{target{what: "x", min: 8}, 7.99, "7.99x", false},
		{target{what: "x", max: 1.2}, 1.2, "1.20x", true},
		{target{what: "x", max: 1.2}, 1.5, "1.50x", false},
	} {
		got := c.t.judge(c.v)
		if !strings.Contains(got, c.ratio) || strings.HasSuffix(got, "NOT MET") == c.met {
			t.Errorf("judge(%v) of %+v = %q", c.v, c.t, got)
		}
	}
}

func TestResultArithmetic(t *testing.T) {
	r := BandwidthResult{Bytes: 3e6, Duration: 2 * time.Second, Flow: flowcontrol.Stats{BytesSent: 1, CapacitySent: 4}}
	if r.MBps() != 1.5 || r.Utilisation() != 0.25 {
		t.Errorf("MBps %v, utilisation %v", r.MBps(), r.Utilisation())
	}
	if (BandwidthResult{Bytes: 1}).MBps() != 0 {
		t.Error("MBps of an empty run")
	}
	c := progressCell([]ProgressResult{{Received: time.Millisecond, Total: 3 * time.Millisecond}, {Received: 3 * time.Millisecond, Total: 5 * time.Millisecond}, {Received: 2 * time.Millisecond, Total: 4 * time.Millisecond}})
	if c.received != 2 || c.total != 4 {
		t.Errorf("progress cell %+v, want medians 2 and 4 ms", c)
	}
}

// TestReports builds the section's tables from made-up cells and checks
// their ratios, verdicts and alignment.
func TestReports(t *testing.T) {
	pl := planFor(true)
	bw := make(map[bwKey]bwCell)
	prog := make(map[progKey]progCell)
	for _, buffer := range Buffers {
		for i, flow := range Flows {
			for _, size := range MessageSizes {
				// credit 100 MB/s, packed 1000 (10x), nicassist 500 (5x)
				bw[bwKey{buffer, flow, size}] = bwCell{mbps: []float64{100, 1000, 500}[i], util: float64(i+1) / 4}
			}
			for _, pace := range Paces {
				for _, compute := range pl.progCompute {
					// credit 1 ms, packed compute + 1 ms, nicassist 1.1 ms
					recv := []float64{1, ms(compute) + 1, 1.1}[i]
					prog[progKey{buffer, pace, flow, compute}] = progCell{received: recv, total: ms(compute) + 1}
				}
			}
		}
	}
	reports := []*report{bandwidthReport(bw, 64<<10, pl), utilisationReport(bw), progressReport(prog, 64<<10, linkPace, pl)}
	var all strings.Builder
	for _, r := range reports {
		var out strings.Builder
		if err := r.print(&out); err != nil {
			t.Fatal(err)
		}
		all.WriteString(out.String())
		// The header and every row are equally wide (right-aligned).
		lines := strings.Split(out.String(), "\n")[1 : 2+len(r.rows)]
		for _, l := range lines {
			if len(l) != len(lines[0]) {
				t.Errorf("%s: row %q is %d wide, header %d", r.title, l, len(l), len(lines[0]))
			}
		}
	}
	for _, want := range []string{
		"packed bandwidth / credit, worst of 256 B..4 KiB >= 8x: 10.00x, met",
		"nicassist bandwidth / credit, worst of 256 B..4 KiB >= 8x: 5.00x, NOT MET",
		"nicassist receive time / credit <= 1.2x: 1.10x, met",
		"packed receive time / credit (clearly worse) >= 2x: 11.00x, met",
		"25%", "50%", "75%",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("reports lack %q:\n%s", want, all.String())
		}
	}
}

func BenchmarkBandwidth(b *testing.B) {
	for _, buffer := range Buffers {
		for _, flow := range Flows {
			b.Run(fmt.Sprintf("buffer=%s/%s", sizeName(buffer), flow), func(b *testing.B) {
				p, err := startPeer(Config{Flow: flow, Buffer: buffer})
				if err != nil {
					b.Fatal(err)
				}
				defer p.close()
				for _, size := range MessageSizes {
					b.Run(sizeName(size), func(b *testing.B) {
						b.SetBytes(int64(size))
						r, err := p.bandwidth(size, func(n int) bool { return n < b.N })
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(r.MBps(), "MB/s")
						b.ReportMetric(100*r.Utilisation(), "util%")
					})
				}
			})
		}
	}
}

func BenchmarkProgress(b *testing.B) {
	for _, flow := range Flows {
		b.Run(flow, func(b *testing.B) {
			p, err := startPeer(Config{Flow: flow, Buffer: 64 << 10})
			if err != nil {
				b.Fatal(err)
			}
			defer p.close()
			for _, pace := range Paces {
				for _, compute := range Computations {
					b.Run(fmt.Sprintf("pace=%dus/compute=%dms", pace.Microseconds(), compute.Milliseconds()), func(b *testing.B) {
						res, err := p.progress(compute, pace, b.N)
						if err != nil {
							b.Fatal(err)
						}
						c := progressCell(res)
						b.ReportMetric(c.received, "recv-ms")
						b.ReportMetric(c.total, "total-ms")
					})
				}
			}
		})
	}
}
