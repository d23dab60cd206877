package seed000

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// The benchmarks run each experiment with b.N as its size (synchronisations,
// messages, milliseconds of streaming, timelines, frame intervals) and
// report the section's figure as a metric.
//
//	go test ./bench/seed000 -run '^$' -bench . -benchtime 1000x

func TestMain(m *testing.M) {
	ServePeer()
	os.Exit(m.Run())
}

func BenchmarkSyncLatency(b *testing.B) {
	for _, n := range syncBlocks {
		for _, tr := range Transports {
			b.Run(fmt.Sprintf("blocks=%d/%s", n, tr), func(b *testing.B) {
				res, err := syncLatency(tr, n, b.N)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(median(micros(res.Lat)), "us/sync")
				if tr == StatusByte {
					b.ReportMetric(res.Reads, "reads/sync")
				}
			})
		}
	}
}

// eachSize runs one sub-benchmark per transport and message size, with
// one transmitter (one child process) per transport.
func eachSize(b *testing.B, bench func(b *testing.B, x *transmitter, size int)) {
	for _, tr := range Transports {
		x, err := newTransmitter(tr)
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range TransmitSizes {
			b.Run(fmt.Sprintf("size=%s/%s", sizeName(size), tr), func(b *testing.B) { bench(b, x, size) })
		}
		if err := x.close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLatency sends b.N messages, one at a time.
func BenchmarkLatency(b *testing.B) {
	eachSize(b, func(b *testing.B, x *transmitter, size int) {
		res, err := x.latency(size, b.N, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(median(micros(res.Lat)), "us/msg")
	})
}

// BenchmarkThroughput streams for b.N milliseconds.
func BenchmarkThroughput(b *testing.B) {
	eachSize(b, func(b *testing.B, x *transmitter, size int) {
		res, err := x.throughput(size, time.Duration(b.N)*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		send, recv := res.CPUPerMiB()
		b.ReportMetric(res.MBps(), "MB/s")
		b.ReportMetric(send, "send-cpu-us/MiB")
		b.ReportMetric(recv, "recv-cpu-us/MiB")
	})
}

func BenchmarkRetained(b *testing.B) {
	for _, tr := range Transports {
		b.Run(tr, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := retainTimeline(tr)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(ratio(res.Phase(retainFrom, retainTo), res.Phase(0, retainFrom)), "held/before")
			}
		})
	}
}

// BenchmarkCamera runs b.N frame intervals (40 ms) of the 12 streams.
func BenchmarkCamera(b *testing.B) {
	for _, tr := range Transports {
		b.Run(tr, func(b *testing.B) {
			res, err := camera(tr, max(time.Duration(b.N), 5)*time.Second/cameraFPS)
			if err != nil {
				b.Fatal(err)
			}
			m, _ := meanStd(res.Rates)
			b.ReportMetric(m, "MB/s")
			b.ReportMetric(cv(res.Rates), "cv")
			b.ReportMetric(quantile(micros(res.Lat), 0.99), "p99-us")
		})
	}
}
