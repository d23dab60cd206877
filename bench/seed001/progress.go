package seed001

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The progress test's bursts: the paper's 100 messages of 4 KiB.
const (
	burstMsg   = 4 << 10
	burstCount = 100
	burstBytes = burstMsg * burstCount
)

// linkPace is the paced receiver's time per burst message: 4 KiB per 4 us,
// about 1 GB/s, the paper's InfiniBand link (SDR 4x, 8 Gb/s of data). A
// receiver on shared memory otherwise consumes as fast as the sender
// writes, and a burst never fills the buffer.
const linkPace = 4 * time.Microsecond

// Computations are the progress test's computation times.
var Computations = []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond}

// ProgressResult is one burst of the progress test.
type ProgressResult struct {
	// Received: from the burst's first write until the receiver held all
	// of it. The held part of a burst reaches it during the computation
	// only if something sends it without the application.
	Received time.Duration
	// Total: from the burst's first write until the sender, done
	// computing, has the receiver's answer (the iteration's time).
	Total time.Duration
}

// progress runs iters bursts on a new stream: write burstCount messages
// of burstMsg bytes, compute for compute without calling into the stream,
// then read the receiver's answer (the time it held the whole burst). The
// receiver pauses pace after each message (0: none).
func (p *peer) progress(compute, pace time.Duration, iters int) ([]ProgressResult, error) {
	s, err := p.ch.Open()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(ioTimeout + time.Duration(iters)*compute))
	if err := request(s, opBursts, burstBytes, iters, int(pace)); err != nil {
		return nil, p.fail(err)
	}
	msg := make([]byte, burstMsg)
	out := make([]ProgressResult, 0, iters)
	for i := range iters {
		start := monoNow()
		for range burstCount {
			if _, err := s.Write(msg); err != nil {
				return nil, p.fail(fmt.Errorf("burst %d: %w", i, err))
			}
		}
		spin(compute)
		var ans [8]byte
		if _, err := io.ReadFull(s, ans[:]); err != nil {
			return nil, p.fail(fmt.Errorf("burst %d: answer: %w", i, err))
		}
		out = append(out, ProgressResult{
			Received: time.Duration(int64(binary.LittleEndian.Uint64(ans[:])) - start),
			Total:    time.Duration(monoNow() - start),
		})
	}
	if err := s.CloseWrite(); err != nil {
		return nil, p.fail(err)
	}
	if _, err := s.Read(msg); !errors.Is(err, io.EOF) {
		return nil, p.fail(fmt.Errorf("after the bursts: %v, want EOF", err))
	}
	return out, nil
}

// spinSink keeps spin's work observable so it is not optimised away.
var spinSink uint64

// spin computes for d: a busy loop that does not touch the stream, as an
// application's computation (time.Since reads the vDSO clock, no system
// call).
func spin(d time.Duration) {
	start := time.Now()
	x := spinSink | 1
	for time.Since(start) < d {
		for range 256 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	spinSink = x
}
