package statusbyte

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

// mustSend sends one block, waiting (SpaceBell) while there is no room.
func mustSend(t testing.TB, tr *Transport, h wire.BlockHeader, p []byte) {
	t.Helper()
	w := wait.NewWaiter(wait.HybridPolicy{Spin: 64})
	var err error
	ready := func() bool {
		var ok bool
		ok, err = tr.TrySend(h, p)
		return ok || err != nil
	}
	if werr := w.Wait(ready, tr.SpaceBell(), time.Now().Add(testDeadline)); werr != nil {
		t.Fatalf("send %+v: %v", h, werr)
	}
	if err != nil {
		t.Fatalf("send %+v: %v", h, err)
	}
}

// mustReceive waits (DataBell) for one block.
func mustReceive(t testing.TB, tr *Transport) wire.Block {
	t.Helper()
	b, err := receiveWait(tr, time.Now().Add(testDeadline))
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return b
}

func receiveWait(tr *Transport, deadline time.Time) (wire.Block, error) {
	w := wait.NewWaiter(wait.HybridPolicy{Spin: 64})
	var b wire.Block
	var err error
	ready := func() bool {
		var ok bool
		b, ok, err = tr.Receive()
		return ok || err != nil
	}
	if werr := w.Wait(ready, tr.DataBell(), deadline); werr != nil && err == nil {
		// the bell reports the peer's end before Receive has drained
		for {
			var ok bool
			if b, ok, err = tr.Receive(); ok || err != nil {
				break
			}
			if time.Now().After(deadline) {
				return b, werr
			}
		}
	}
	return b, err
}

// held returns the blocks of stream the sender holds.
func held(t *Transport, stream uint32) int {
	n, _ := t.Held(stream)
	return n
}
