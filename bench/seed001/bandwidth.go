package seed001

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

// MessageSizes are the bandwidth test's message sizes (the paper's range).
var MessageSizes = []int{256, 1 << 10, 4 << 10, 16 << 10, 64 << 10}

// Buffers are the receive buffers of the bandwidth and utilisation tests.
var Buffers = []int{64 << 10, 256 << 10}

// ioTimeout bounds every wait of a measurement beyond its own length.
const ioTimeout = 30 * time.Second

// BandwidthResult is one bandwidth run: one stream, back-to-back writes
// of one size for a while, read by the child in reads of the same size.
type BandwidthResult struct {
	Bytes    int64             // bytes the receiver read
	Duration time.Duration     // first write until the receiver's EOF
	Flow     flowcontrol.Stats // the sending end's controller
}

// MBps returns the bandwidth in MB/s (10^6 bytes).
func (r BandwidthResult) MBps() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Duration.Seconds() / 1e6
}

// Utilisation returns how full the blocks the sender wrote were (bytes
// over the blocks' payload room): the share of the receiver's buffer
// that carried data.
func (r BandwidthResult) Utilisation() float64 { return r.Flow.Utilisation() }

// bandwidth writes msg-byte messages on a new stream while more reports
// true (asked before each write with the count so far), half-closes, and
// returns what the child read.
func (p *peer) bandwidth(msg int, more func(writes int) bool) (BandwidthResult, error) {
	s, err := p.ch.Open()
	if err != nil {
		return BandwidthResult{}, err
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(ioTimeout))
	if err := request(s, opSink, msg, 0, 0); err != nil {
		return BandwidthResult{}, p.fail(err)
	}
	buf := make([]byte, msg)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := monoNow()
	for n := 0; more(n); n++ {
		if _, err := s.Write(buf); err != nil {
			return BandwidthResult{}, p.fail(fmt.Errorf("write %d: %w", n, err))
		}
	}
	if err := s.CloseWrite(); err != nil {
		return BandwidthResult{}, p.fail(err)
	}
	var ans [16]byte
	if _, err := io.ReadFull(s, ans[:]); err != nil {
		return BandwidthResult{}, p.fail(fmt.Errorf("sink's answer: %w", err))
	}
	return BandwidthResult{
		Bytes:    int64(binary.LittleEndian.Uint64(ans[0:])) - headerLen,
		Duration: time.Duration(int64(binary.LittleEndian.Uint64(ans[8:])) - start),
		Flow:     p.ch.lastFlowStats(),
	}, nil
}

// bandwidthFor runs bandwidth for dur (the clock is read every 16
// writes).
func (p *peer) bandwidthFor(msg int, dur time.Duration) (BandwidthResult, error) {
	end := time.Now().Add(dur)
	return p.bandwidth(msg, func(n int) bool { return n%16 != 0 || time.Now().Before(end) })
}
