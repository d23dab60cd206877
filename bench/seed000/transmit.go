package seed000

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/wait"
)

// Transmission latency and throughput over one stream of a channel, per
// message size. The parent writes, the child reads; each stream starts
// with a 16-byte request (mode, message size).
//
// Latency: the parent notes the time, writes one message; the child
// notes the time it has read the whole message and answers with it (8
// bytes); one sample per message, one way, on the shared clock.
//
// Throughput: the parent writes messages back to back for a while, then
// shuts its side down; the child reads to EOF and answers with the time
// it read the last byte, the bytes and its CPU time. Throughput is bytes
// over (last byte read - first write); the sender's CPU is this process's
// CPU time over the same span (every goroutine of the channel included).

const (
	modeLatency = 1
	modeSink    = 2
)

// TransmitSizes are the message sizes, 64 B to 8 MiB.
var TransmitSizes = []int{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20}

// LatencyResult is one size's one-way latencies.
type LatencyResult struct {
	Size int
	Lat  []time.Duration
}

// ThroughputResult is one throughput run.
type ThroughputResult struct {
	Size        int
	Bytes       int64
	Elapsed     time.Duration
	SenderCPU   time.Duration
	ReceiverCPU time.Duration
}

// MBps is the throughput in MB/s (10^6 bytes).
func (r ThroughputResult) MBps() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6 }

// CPUPerMiB returns the sender's and the receiver's CPU time per MiB, in
// microseconds.
func (r ThroughputResult) CPUPerMiB() (send, recv float64) {
	mib := float64(r.Bytes) / (1 << 20)
	return float64(r.SenderCPU.Microseconds()) / mib, float64(r.ReceiverCPU.Microseconds()) / mib
}

// transmitter is the parent's side of the transmission experiments over
// one transport.
type transmitter struct {
	restore func()
	pp      *peerProc
	l       *link
	ch      *mux.Channel
	msg     []byte
}

// transmitWait is the wait mode of the transmission experiments: both
// sides poll, as the seed's do, so that the figures are the transport's
// and not the doorbells' (a cross-core wakeup here costs 25-30 us).
const transmitWait = wait.WaitModeBusy

func newTransmitter(tr string) (*transmitter, error) {
	restore := setProcs(spinProcs)
	pp, l, ch, err := streamPeer(job{Role: "stream-peer", Wait: transmitWait, Procs: spinProcs}, tr)
	if err != nil {
		restore()
		return nil, err
	}
	msg := make([]byte, TransmitSizes[len(TransmitSizes)-1])
	for i := range msg {
		msg[i] = byte(i*7 + i>>9)
	}
	return &transmitter{restore: restore, pp: pp, l: l, ch: ch, msg: msg}, nil
}

// close ends the channel and the child.
func (x *transmitter) close() error {
	x.ch.Close()
	x.l.prov.Close()
	_, err := x.pp.finish(30 * time.Second)
	x.restore()
	return err
}

// open opens a stream and sends its request.
func (x *transmitter) open(mode, size int) (*mux.Stream, error) {
	s, err := x.ch.Open()
	if err != nil {
		return nil, err
	}
	s.SetDeadline(time.Now().Add(2 * time.Minute))
	var req [16]byte
	binary.LittleEndian.PutUint64(req[:], uint64(mode))
	binary.LittleEndian.PutUint64(req[8:], uint64(size))
	if _, err := s.Write(req[:]); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// latency sends up to n messages of size, stopping after budget.
func (x *transmitter) latency(size, n int, budget time.Duration) (LatencyResult, error) {
	res := LatencyResult{Size: size}
	s, err := x.open(modeLatency, size)
	if err != nil {
		return res, err
	}
	defer s.Close()
	var ans [8]byte
	end := time.Now().Add(budget)
	for i := -3; i < n; i++ { // three to warm up
		t0 := monoNow()
		if _, err := s.Write(x.msg[:size]); err != nil {
			return res, err
		}
		if _, err := io.ReadFull(s, ans[:]); err != nil {
			return res, err
		}
		if i >= 0 {
			res.Lat = append(res.Lat, time.Duration(int64(binary.LittleEndian.Uint64(ans[:]))-t0))
		}
		if i >= 2 && time.Now().After(end) {
			break
		}
	}
	return res, s.CloseWrite()
}

// throughput streams messages of size for about dur (at least 8).
func (x *transmitter) throughput(size int, dur time.Duration) (ThroughputResult, error) {
	res := ThroughputResult{Size: size}
	s, err := x.open(modeSink, size)
	if err != nil {
		return res, err
	}
	defer s.Close()
	cpu0, t0 := cpuNow(), monoNow()
	for i := 0; i < 8 || monoNow()-t0 < int64(dur); i++ {
		if _, err := s.Write(x.msg[:size]); err != nil {
			return res, err
		}
	}
	if err := s.CloseWrite(); err != nil {
		return res, err
	}
	var ans [24]byte
	if _, err := io.ReadFull(s, ans[:]); err != nil {
		return res, err
	}
	res.SenderCPU = cpuNow() - cpu0
	res.Elapsed = time.Duration(int64(binary.LittleEndian.Uint64(ans[:])) - t0)
	res.Bytes = int64(binary.LittleEndian.Uint64(ans[8:]))
	res.ReceiverCPU = time.Duration(binary.LittleEndian.Uint64(ans[16:]))
	return res, nil
}

func init() {
	roles["stream-peer"] = streamPeerRole
}

// streamPeerRole is the child of the transmission experiments: it serves
// the streams the parent opens, one after the other (the parent opens the
// next when it is done with one), until the channel ends. Serving them in
// turn keeps a polling Accept from competing with the measured reader.
func streamPeerRole(j job, l *link) (report, error) {
	ch, err := openChannel(l, j.Wait)
	if err != nil {
		return report{}, err
	}
	defer ch.Close()
	for {
		s, err := ch.Accept(time.Time{})
		if err != nil {
			return report{}, nil // the parent closed the channel
		}
		serveStream(s) // its errors end the stream, the parent reports them
		s.Close()
	}
}

// serveStream answers one stream's request.
func serveStream(s *mux.Stream) error {
	var req [16]byte
	if _, err := io.ReadFull(s, req[:]); err != nil {
		return err
	}
	mode, size := binary.LittleEndian.Uint64(req[:]), int(binary.LittleEndian.Uint64(req[8:]))
	if size <= 0 || size > 64<<20 {
		return fmt.Errorf("bad size %d", size)
	}
	switch mode {
	case modeLatency:
		buf := make([]byte, size)
		var ans [8]byte
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(ans[:], uint64(monoNow()))
			if _, err := s.Write(ans[:]); err != nil {
				return err
			}
		}
	case modeSink:
		buf := make([]byte, max(size, 256<<10))
		cpu0 := cpuNow()
		var total int64
		for {
			n, err := s.Read(buf)
			total += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		var ans [24]byte
		binary.LittleEndian.PutUint64(ans[:], uint64(monoNow()))
		binary.LittleEndian.PutUint64(ans[8:], uint64(total))
		binary.LittleEndian.PutUint64(ans[16:], uint64(cpuNow()-cpu0))
		_, err := s.Write(ans[:])
		return err
	}
	return fmt.Errorf("bad mode %d", mode)
}
