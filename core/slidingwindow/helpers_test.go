package slidingwindow

import (
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// testDeadline bounds every wait of a test, so a bug fails instead of
// hanging.
const testDeadline = 20 * time.Second

// pair opens two transports in this process, each with its own provider,
// over a socketpair; both are closed at cleanup.
func pair(t testing.TB, cfg Config) (a, b *Transport) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var ts [2]*Transport
	var errs [2]error
	var wg sync.WaitGroup
	for i := range ts {
		p, err := shm.Open()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[i], errs[i] = Open(p, fds[i], cfg, time.Now().Add(testDeadline))
		}()
		t.Cleanup(func() {
			if ts[i] != nil {
				ts[i].Close()
			}
			if err := p.Close(); err != nil {
				t.Errorf("provider %d still busy after Close: %v", i, err)
			}
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Open: %v / %v", errs[0], errs[1])
	}
	return ts[0], ts[1]
}

// pattern fills p with bytes derived from (stream, seq).
func pattern(p []byte, stream, seq uint32) {
	x := stream*2654435761 + seq*40503 + 1
	for i := range p {
		x = x*1103515245 + 12345
		p[i] = byte(x >> 16)
	}
}

func sum(p []byte) uint32 { return crc32.ChecksumIEEE(p) }

// intact reports whether b's payload is the pattern of its stream and seq.
func intact(b wire.Block) bool {
	want := make([]byte, len(b.Payload))
	pattern(want, b.Stream, b.Seq)
	return sum(want) == sum(b.Payload)
}

func newWaiter() *wait.Waiter { return wait.NewWaiter(wait.HybridPolicy{Spin: 64}) }

// sendWait sends one block, sleeping on SpaceBell while there is no room.
func sendWait(w *wait.Waiter, tr *Transport, h wire.BlockHeader, p []byte, deadline time.Time) error {
	var err error
	ready := func() bool {
		var ok bool
		ok, err = tr.TrySend(h, p)
		return ok || err != nil
	}
	if werr := w.Wait(ready, tr.SpaceBell(), deadline); werr != nil && err == nil {
		return werr
	}
	return err
}

// receiveWait waits (DataBell) for one block or the transport's end.
func receiveWait(w *wait.Waiter, tr *Transport, deadline time.Time) (wire.Block, error) {
	var b wire.Block
	var err error
	ready := func() bool {
		var ok bool
		b, ok, err = tr.Receive()
		return ok || err != nil
	}
	if werr := w.Wait(ready, tr.DataBell(), deadline); werr != nil && err == nil {
		// the bell may report the end before Receive returned the last
		// blocks: take them.
		if b, ok, rerr := tr.Receive(); ok || rerr != nil {
			return b, rerr
		}
		return b, werr
	}
	return b, err
}

func mustSend(t testing.TB, tr *Transport, h wire.BlockHeader, p []byte) {
	t.Helper()
	if err := sendWait(newWaiter(), tr, h, p, time.Now().Add(testDeadline)); err != nil {
		t.Fatalf("send %+v: %v", h, err)
	}
}

func mustReceive(t testing.TB, tr *Transport) wire.Block {
	t.Helper()
	b, err := receiveWait(newWaiter(), tr, time.Now().Add(testDeadline))
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return b
}

func dataHeader(stream, seq uint32) wire.BlockHeader {
	return wire.BlockHeader{Stream: stream, Seq: seq, Flags: wire.FlagData}
}

func deadline() time.Time { return time.Now().Add(testDeadline) }

// rcvArrived returns how many blocks arrived at tr.
func (t *Transport) rcvArrived() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rcv.arrived
}
