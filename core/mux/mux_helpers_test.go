package mux_test

import (
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wire"
)

// muxDeadline bounds every wait in the channel tests.
const muxDeadline = 30 * time.Second

// creditFlow is a small credit controller for core's own tests: K blocks
// per stream, one write per block unless packed, credits returned once
// half are used. It exercises control records end to end.
type creditFlow struct {
	k, credits, owed int
	packed           bool
}

func newCreditFlow(k int, packed bool) func() wire.FlowController {
	return func() wire.FlowController { return &creditFlow{k: k, credits: k, packed: packed} }
}

func (f *creditFlow) Name() string { return "testcredit" }
func (f *creditFlow) NextSegment(queued, msg, max int) int {
	if f.credits == 0 {
		return 0
	}
	if f.packed {
		return min(queued, max)
	}
	return min(msg, max)
}
func (f *creditFlow) Sent(int)                   { f.credits-- }
func (f *creditFlow) Buffered() bool             { return f.packed }
func (f *creditFlow) AsyncFlush() bool           { return true }
func (f *creditFlow) Open() []wire.ControlRecord { return nil }
func (f *creditFlow) Consumed(int) (wire.ControlRecord, bool) {
	if f.owed++; f.owed*2 >= f.k {
		r := wire.ControlRecord{Kind: wire.ControlCredit, Value: uint32(f.owed)}
		f.owed = 0
		return r, true
	}
	return wire.ControlRecord{}, false
}
func (f *creditFlow) Arrived(int) error { return nil }
func (f *creditFlow) OnControl(r wire.ControlRecord) error {
	if r.Kind != wire.ControlCredit || f.credits+int(r.Value) > f.k {
		return fmt.Errorf("credit record %+v with %d of %d credits: %w", r, f.credits, f.k, wire.ErrProtocol)
	}
	f.credits += int(r.Value)
	return nil
}

// openFlow lets everything go: packing, no control records.
type openFlow struct{}

func (openFlow) Name() string                            { return "open" }
func (openFlow) NextSegment(queued, msg, max int) int    { return min(queued, max) }
func (openFlow) Sent(int)                                {}
func (openFlow) Buffered() bool                          { return false }
func (openFlow) AsyncFlush() bool                        { return true }
func (openFlow) Open() []wire.ControlRecord              { return nil }
func (openFlow) Consumed(int) (wire.ControlRecord, bool) { return wire.ControlRecord{}, false }
func (openFlow) OnControl(wire.ControlRecord) error      { return nil }
func (openFlow) Arrived(int) error                       { return nil }

func newOpenFlow() wire.FlowController { return openFlow{} }

// channelPair opens two channels in this process over a status-byte
// transport with its own provider each.
func channelPair(t testing.TB, tc statusbyte.Config, cc mux.ChannelConfig) (a, b *mux.Channel) {
	t.Helper()
	a, b, _, _ = channelPairT(t, tc, cc)
	return a, b
}

// channelPairT is channelPair that also returns the transports.
func channelPairT(t testing.TB, tc statusbyte.Config, cc mux.ChannelConfig) (a, b *mux.Channel, ta, tb *statusbyte.Transport) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var chs [2]*mux.Channel
	var trs [2]*statusbyte.Transport
	var errs [2]error
	var wg sync.WaitGroup
	for i := range chs {
		p, err := shm.Open()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := statusbyte.Open(p, fds[i], tc, time.Now().Add(muxDeadline))
			if err != nil {
				errs[i] = err
				return
			}
			trs[i] = tr
			cfg := cc
			cfg.Initiator = tr.Initiator()
			chs[i], errs[i] = mux.NewChannel(tr, cfg)
		}()
		t.Cleanup(func() {
			if chs[i] != nil {
				chs[i].Close()
			}
			p.Close()
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("open channels: %v / %v", errs[0], errs[1])
	}
	return chs[0], chs[1], trs[0], trs[1]
}

// openPair opens a stream on a and accepts it on b.
func openPair(t testing.TB, a, b *mux.Channel) (sa, sb *mux.Stream) {
	t.Helper()
	sa, err := a.Open()
	if err != nil {
		t.Fatal(err)
	}
	sb, err = b.Accept(time.Now().Add(muxDeadline))
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if sa.ID() != sb.ID() {
		t.Fatalf("opened %d, accepted %d", sa.ID(), sb.ID())
	}
	return sa, sb
}

// sendRandom writes total bytes of seed's pattern in random-sized writes
// and returns their checksum.
func sendRandom(s *mux.Stream, seed uint64, total, maxWrite int) (uint32, error) {
	rng := rand.New(rand.NewPCG(seed, 99))
	data := make([]byte, total)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	s.SetWriteDeadline(time.Now().Add(muxDeadline))
	for off := 0; off < total; {
		n := min(1+rng.IntN(maxWrite), total-off)
		w, err := s.Write(data[off : off+n])
		if err != nil {
			return 0, fmt.Errorf("write at %d: %w", off, err)
		}
		if w != n {
			return 0, fmt.Errorf("short write %d of %d", w, n)
		}
		off += n
	}
	return crc32.ChecksumIEEE(data), nil
}

// recvAll reads until EOF in random-sized reads and returns the byte
// count and checksum.
func recvAll(s *mux.Stream, seed uint64, maxRead int) (int, uint32, error) {
	rng := rand.New(rand.NewPCG(seed, 7))
	h := crc32.NewIEEE()
	buf := make([]byte, maxRead)
	total := 0
	s.SetReadDeadline(time.Now().Add(muxDeadline))
	for {
		n, err := s.Read(buf[:1+rng.IntN(maxRead)])
		h.Write(buf[:n])
		total += n
		if err == io.EOF {
			return total, h.Sum32(), nil
		}
		if err != nil {
			return total, 0, err
		}
	}
}
