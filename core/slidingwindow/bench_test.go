package slidingwindow

import (
	"fmt"
	"testing"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Benchmarks across two processes on the shm provider, named like the
// status-byte transport's so `make bench` can print the two side by side:
// Throughput streams b.N blocks of one payload size to a peer that
// receives and releases them (b.SetBytes: MB/s is payload throughput);
// PingPong bounces one 64-byte block b.N times (ns/op is a round trip).
// Both sides wait with the default (adaptive) policy.

func init() {
	peerSides["bench-sink"] = func(e *peerEnv) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		w := benchWaiter()
		for i := 0; i < e.count; i++ {
			b, err := receiveWait(w, tr, e.deadline)
			if err != nil {
				return fmt.Errorf("block %d: %w", i, err)
			}
			tr.Release(b)
		}
		if err := e.send(1); err != nil {
			return err
		}
		return e.expect(1)
	}
	peerSides["bench-echo"] = func(e *peerEnv) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		rw, sw := benchWaiter(), benchWaiter()
		p := make([]byte, tr.MaxPayload())
		for i := 0; i < e.count; i++ {
			b, err := receiveWait(rw, tr, e.deadline)
			if err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			n := copy(p, b.Payload)
			tr.Release(b)
			if err := sendWait(sw, tr, dataHeader(1, uint32(i)), p[:n], e.deadline); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		return e.expect(1)
	}
}

func benchWaiter() *wait.Waiter {
	p, err := wait.NewWaitPolicy(wait.WaitModeAdaptive, wait.DefaultPollParams())
	if err != nil {
		panic(err)
	}
	return wait.NewWaiter(p)
}

// benchPeer starts side B of a benchmark case and opens side A.
func benchPeer(b *testing.B, name string, cfg Config) (*peerEnv, *peerProc, *Transport) {
	b.Helper()
	e, proc := startPeer(b, name, cfg, 0, b.N)
	tr, err := e.open()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		tr.Close()
		if err := proc.wait(e.deadline); err != nil {
			b.Errorf("peer: %v\n%s", err, proc.out.String())
		}
	})
	return e, proc, tr
}

func BenchmarkThroughput(b *testing.B) {
	for _, size := range []int{256, 4 << 10, 64 << 10} {
		b.Run(sizeName(size), func(b *testing.B) {
			cfg := Config{Blocks: 64, BlockSize: roundUp(size+wire.HeaderSize, 64)}
			e, _, tr := benchPeer(b, "bench-sink", cfg)
			p := make([]byte, size)
			pattern(p, 1, 0)
			w := benchWaiter()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := sendWait(w, tr, dataHeader(1, uint32(i)), p, e.deadline); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.expect(1); err != nil { // the peer has them all
				b.Fatal(err)
			}
			b.StopTimer()
			s := tr.Stats()
			b.ReportMetric(float64(s.AcksReceived)/float64(b.N), "acks/block")
			e.send(1)
		})
	}
}

func BenchmarkPingPong(b *testing.B) {
	for _, n := range []int{3, 8, 16, 64} {
		b.Run(fmt.Sprintf("blocks=%d", n), func(b *testing.B) {
			e, _, tr := benchPeer(b, "bench-echo", Config{Blocks: n, BlockSize: 128})
			p := make([]byte, 64)
			rw, sw := benchWaiter(), benchWaiter()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := sendWait(sw, tr, dataHeader(1, uint32(i)), p, e.deadline); err != nil {
					b.Fatal(err)
				}
				blk, err := receiveWait(rw, tr, e.deadline)
				if err != nil {
					b.Fatal(err)
				}
				tr.Release(blk)
			}
			b.StopTimer()
			e.send(1)
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
