package mux_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Benchmarks over shm between two processes: a status-byte channel of 64
// blocks of 64 KiB, no flow control beyond the channel's (openFlow).
//
//	go test ./core -run '^$' -bench 'Stream' -benchtime 2s

// benchSink is the peer of BenchmarkStreamThroughput: for each stream it
// reads to EOF and answers one byte.
func benchSink(ch *mux.Channel) int {
	for {
		s, err := ch.Accept(time.Time{})
		if err != nil {
			return 0
		}
		go func() {
			buf := make([]byte, 256<<10)
			for {
				if _, err := s.Read(buf); err != nil {
					break
				}
			}
			s.Write([]byte{1})
			s.Close()
		}()
	}
}

// BenchmarkStreamThroughput: one stream, writes of 256 B, 4 KiB, 64 KiB
// (one write per block up to the block size), to a reading peer process.
func BenchmarkStreamThroughput(b *testing.B) {
	for _, mode := range []string{wait.WaitModeAdaptive, wait.WaitModeBusy} {
		ch, _, _ := startMuxPeer(b, "bench-sink:"+mode)
		for _, size := range []int{256, 4 << 10, 64<<10 - wire.HeaderSize} {
			b.Run(fmt.Sprintf("%s/%d", mode, size), func(b *testing.B) {
				s, err := ch.Open()
				if err != nil {
					b.Fatal(err)
				}
				msg := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.Write(msg); err != nil {
						b.Fatal(err)
					}
				}
				s.CloseWrite()
				if _, err := io.ReadFull(s, msg[:1]); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
			})
		}
	}
}

// BenchmarkStreamPingPong: one stream, a 64-byte message to an echoing
// peer process and back, one at a time; ns/op is the round trip.
func BenchmarkStreamPingPong(b *testing.B) {
	for _, mode := range []string{wait.WaitModeBusy, wait.WaitModeAdaptive, wait.WaitModeEvent} {
		b.Run(mode, func(b *testing.B) {
			ch, _, _ := startMuxPeer(b, "bench-echo:"+mode)
			s, err := ch.Open()
			if err != nil {
				b.Fatal(err)
			}
			msg := make([]byte, 64)
			for i := 0; i < 100; i++ { // warm up both sides' policies
				s.Write(msg)
				io.ReadFull(s, msg)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(s, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
