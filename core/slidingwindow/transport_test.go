package slidingwindow

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

func TestSendReceiveRelease(t *testing.T) {
	a, b := pair(t, Config{Blocks: 4, BlockSize: 256})
	if a.Initiator() == b.Initiator() {
		t.Fatal("both sides have the same role")
	}
	if a.MaxPayload() != 256-wire.HeaderSize || a.Blocks() != 4 {
		t.Fatalf("MaxPayload %d, Blocks %d", a.MaxPayload(), a.Blocks())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for seq := uint32(0); seq < 200; seq++ {
		p := make([]byte, 1+rng.IntN(a.MaxPayload()))
		pattern(p, 7, seq)
		mustSend(t, a, dataHeader(7, seq), p)
		blk := mustReceive(t, b)
		if blk.Stream != 7 || blk.Seq != seq || int(blk.Len) != len(p) || sum(blk.Payload) != sum(p) {
			t.Fatalf("block %d: got %+v (sum %#x), want len %d sum %#x", seq, blk.BlockHeader, sum(blk.Payload), len(p), sum(p))
		}
		if blk.Index != int(seq%4) {
			t.Fatalf("block %d in slot %d", seq, blk.Index)
		}
		b.Release(blk)
	}
	if s := a.Stats(); s.BlocksSent != 200 || s.AcksReceived == 0 {
		t.Errorf("sender stats %+v", s)
	}
	if s := b.Stats(); s.BlocksReceived != 200 || s.AcksSent > 200 {
		t.Errorf("receiver stats %+v", s)
	}
}

// TestFullRingInOrderRelease: a full ring refuses; a release out of order
// frees nothing; the oldest release frees the run it completes.
func TestFullRingInOrderRelease(t *testing.T) {
	a, b := pair(t, Config{Blocks: 3, BlockSize: 128})
	for i := uint32(0); i < 3; i++ {
		if ok, err := a.TrySend(dataHeader(1, i), []byte{byte(i)}); !ok || err != nil {
			t.Fatalf("send %d: %v %v", i, ok, err)
		}
	}
	if ok, err := a.TrySend(dataHeader(1, 3), []byte("x")); ok || err != nil {
		t.Fatalf("send into a full ring: %v %v", ok, err)
	}
	blks := []wire.Block{mustReceive(t, b), mustReceive(t, b), mustReceive(t, b)}
	if _, ok, _ := b.Receive(); ok {
		t.Fatal("a fourth block arrived")
	}
	b.Release(blks[2])
	b.Release(blks[1])
	b.Release(blks[1]) // twice: ignored
	if s := b.Stats(); s.AcksSent != 0 {
		t.Fatalf("acknowledged with the oldest block held: %+v", s)
	}
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TrySend(dataHeader(1, 3), []byte("x")); ok || err != nil {
		t.Fatalf("send with the oldest block held: %v %v", ok, err)
	}
	b.Release(blks[0]) // frees all three; the sender said it was full
	mustSend(t, a, dataHeader(1, 3), []byte("x"))
	for i := uint32(4); i < 6; i++ {
		if ok, err := a.TrySend(dataHeader(1, i), []byte("x")); !ok || err != nil {
			t.Fatalf("send %d after the release: %v %v", i, ok, err)
		}
	}
	for i := uint32(3); i < 6; i++ {
		if blk := mustReceive(t, b); blk.Seq != i {
			t.Fatalf("got block %d, want %d", blk.Seq, i)
		}
	}
}

func TestSendRejectsBadBlocks(t *testing.T) {
	a, _ := pair(t, Config{Blocks: 2, BlockSize: 64})
	for _, c := range []struct {
		h wire.BlockHeader
		p []byte
	}{
		{dataHeader(1, 0), make([]byte, 49)},
		{dataHeader(0, 0), []byte("x")},
		{dataHeader(1, 0), nil},
		{wire.BlockHeader{Stream: 1, Flags: wire.FlagReset}, []byte("x")},
	} {
		if ok, err := a.TrySend(c.h, c.p); ok || !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("TrySend(%+v, %d bytes) = %v, %v; want ErrInvalid", c.h, len(c.p), ok, err)
		}
	}
}

func TestCloseEndsPeer(t *testing.T) {
	a, b := pair(t, Config{Blocks: 4, BlockSize: 128})
	mustSend(t, a, dataHeader(2, 0), []byte("last words"))
	first := mustReceive(t, b) // arrived before the Close
	a.Close()
	if _, err := receiveWait(newWaiter(), b, deadline()); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("receive after the peer closed: %v, want ErrPeerGone", err)
	}
	if ok, err := b.TrySend(dataHeader(2, 0), []byte("x")); ok || !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("send after the peer closed: %v %v", ok, err)
	}
	if string(first.Payload) != "last words" {
		t.Fatalf("payload %q", first.Payload)
	}
	if _, _, err := a.Receive(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("receive after Close: %v, want ErrClosed", err)
	}
	if err := a.SpaceBell().Arm(); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("Arm after Close: %v", err)
	}
}

func TestConfigMismatch(t *testing.T) {
	if _, err := Open(nil, -1, Config{Blocks: -1}, deadline()); !errors.Is(err, verbs.ErrInvalid) {
		t.Fatalf("Open with -1 blocks: %v", err)
	}
	if _, err := Open(nil, -1, Config{BlockSize: wire.HeaderSize}, deadline()); !errors.Is(err, verbs.ErrInvalid) {
		t.Fatalf("Open with a header-sized block: %v", err)
	}
}

// TestCloseWithBlocksWaiting: blocks that arrived but were never returned
// are not touched after Close (the ring is unmapped).
func TestCloseWithBlocksWaiting(t *testing.T) {
	a, b := pair(t, Config{Blocks: 4, BlockSize: 128})
	for i := uint32(0); i < 3; i++ {
		mustSend(t, a, dataHeader(1, i), []byte("waiting"))
	}
	for dl := deadline(); b.rcvArrived() < 3; {
		if err := b.Refresh(); err != nil || time.Now().After(dl) {
			t.Fatalf("%d blocks arrived: %v", b.rcvArrived(), err)
		}
		runtime.Gosched()
	}
	blk := mustReceive(t, b)
	b.Close()
	b.Release(blk)
	if _, ok, err := b.Receive(); ok || !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("receive after Close: %v %v", ok, err)
	}
	if ok, err := b.TrySend(dataHeader(1, 0), []byte("x")); ok || !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("send after Close: %v %v", ok, err)
	}
	if err := b.DataBell().Sleep(deadline()); !errors.Is(err, verbs.ErrClosed) {
		t.Fatalf("sleep after Close: %v", err)
	}
}

// TestConcurrentUseAndClose runs senders, receivers and sleepers on both
// sides while one side closes: every call ends with an error, none hangs.
func TestConcurrentUseAndClose(t *testing.T) {
	a, b := pair(t, Config{Blocks: 8, BlockSize: 256})
	var wg sync.WaitGroup
	for _, tr := range []*Transport{a, b} {
		for g := 0; g < 2; g++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				w := newWaiter()
				for i := uint32(0); ; i++ {
					if err := sendWait(w, tr, dataHeader(uint32(g+1), i), []byte("concurrent"), deadline()); err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				w := newWaiter()
				for {
					blk, err := receiveWait(w, tr, deadline())
					if err != nil {
						return
					}
					tr.Release(blk)
				}
			}()
		}
	}
	for dl := deadline(); a.Stats().BlocksReceived < 100 || b.Stats().BlocksReceived < 100; {
		if time.Now().After(dl) {
			a.Close()
			t.Fatalf("no progress: %+v / %+v", a.Stats(), b.Stats())
		}
		runtime.Gosched()
	}
	a.Close()
	wg.Wait()
}
