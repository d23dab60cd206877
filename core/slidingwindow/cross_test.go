package slidingwindow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

func init() {
	peerSides["stream"] = func(e *peerEnv) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		return streamSide(e, tr, e.seed^0xB)
	}
	peerSides["hold"] = holdB
	peerSides["killed"] = killedB
	peerSides["close"] = closeB
}

// streamBlocks is how many blocks each side sends in the stream case.
func streamBlocks() int {
	if testing.Short() {
		return 500
	}
	return 3000
}

// streamSide sends streamBlocks blocks of random sizes on three streams
// while it receives as many, checking order and checksums and releasing
// out of order: each block is held until it is hold blocks old (hold < N,
// so the oldest block is always released in time) or a coin says so.
// Both sides then swap a word, so neither closes before the other is done.
func streamSide(e *peerEnv, tr *Transport, seed uint64) error {
	k := e.count
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		w := newWaiter()
		p := make([]byte, tr.MaxPayload())
		for i := 0; i < k && sendErr == nil; i++ {
			n := 1 + rng.IntN(tr.MaxPayload())
			if rng.IntN(4) == 0 {
				n = 1 + rng.IntN(8) // many tiny blocks too
			}
			stream := uint32(1 + i%3)
			pattern(p[:n], stream, uint32(i))
			sendErr = sendWait(w, tr, dataHeader(stream, uint32(i)), p[:n], e.deadline)
		}
	}()
	recvErr := func() error {
		rng := rand.New(rand.NewPCG(seed, 2))
		hold := rng.IntN(tr.Blocks())
		w := newWaiter()
		var held []wire.Block
		for i := 0; i < k; i++ {
			b, err := receiveWait(w, tr, e.deadline)
			if err != nil {
				return fmt.Errorf("receive %d: %w", i, err)
			}
			if b.Seq != uint32(i) || b.Stream != uint32(1+i%3) || !intact(b) {
				return fmt.Errorf("block %d: got %+v, intact %v", i, b.BlockHeader, intact(b))
			}
			held = append(held, b)
			for j := 0; j < len(held); {
				if int(held[j].Seq)+hold <= i || rng.IntN(3) == 0 {
					tr.Release(held[j])
					held = append(held[:j], held[j+1:]...)
					continue
				}
				j++
			}
		}
		for _, b := range held {
			tr.Release(b)
		}
		return nil
	}()
	wg.Wait()
	if err := errors.Join(sendErr, recvErr); err != nil {
		return err
	}
	if err := e.send(1); err != nil {
		return err
	}
	return e.expect(1)
}

func TestStreamCrossProcess(t *testing.T) {
	for _, cfg := range []Config{
		{Blocks: 1, BlockSize: 64},
		{Blocks: 3, BlockSize: 200},
		{Blocks: 16, BlockSize: 4096},
	} {
		t.Run(fmt.Sprintf("%dx%d", cfg.Blocks, cfg.BlockSize), func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			runPeer(t, "stream", cfg, seed, streamBlocks(), func(e *peerEnv, _ *peerProc) error {
				tr, err := e.open()
				if err != nil {
					return err
				}
				defer tr.Close()
				if err := streamSide(e, tr, seed^0xA); err != nil {
					return err
				}
				s := tr.Stats()
				t.Logf("side A: %+v (%.2f acknowledgements per block)", s, float64(s.AcksSent)/float64(s.BlocksReceived))
				return nil
			})
		})
	}
}

// The hold case (3 blocks): A fills the ring; B releases blocks 2 and 1
// but not 0, which must free nothing; A sleeps on SpaceBell; B releases
// block 0, whose acknowledgement wakes A, which sends three more.
var holdConfig = Config{Blocks: 3, BlockSize: 128}

func TestHoldInOrderCrossProcess(t *testing.T) {
	runPeer(t, "hold", holdConfig, 0, 0, func(e *peerEnv, _ *peerProc) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		for i := uint32(0); i < 3; i++ {
			if ok, err := tr.TrySend(dataHeader(1, i), []byte{byte(i)}); !ok || err != nil {
				return fmt.Errorf("send %d: %v %v", i, ok, err)
			}
		}
		if ok, err := tr.TrySend(dataHeader(1, 3), []byte{3}); ok || err != nil {
			return fmt.Errorf("send into a full ring: %v %v", ok, err)
		}
		if err := e.send(1); err != nil {
			return err
		}
		if err := e.expect(2); err != nil { // B released 2 and 1
			return err
		}
		if err := tr.Refresh(); err != nil {
			return err
		}
		if ok, err := tr.TrySend(dataHeader(1, 3), []byte{3}); ok || err != nil {
			return fmt.Errorf("send with block 0 held: %v %v", ok, err)
		}
		woke := make(chan error, 1)
		go func() {
			woke <- sendWait(wait.NewWaiter(wait.EventPolicy{}), tr, dataHeader(1, 3), []byte{3}, e.deadline)
		}()
		if err := e.send(3); err != nil {
			return err
		}
		if err := <-woke; err != nil {
			return fmt.Errorf("sender sleeping for space: %w", err)
		}
		for i := uint32(4); i < 6; i++ {
			if ok, err := tr.TrySend(dataHeader(1, i), []byte{byte(i)}); !ok || err != nil {
				return fmt.Errorf("send %d: %v %v", i, ok, err)
			}
		}
		if ok, err := tr.TrySend(dataHeader(1, 6), []byte{6}); ok || err != nil {
			return fmt.Errorf("send into a full ring again: %v %v", ok, err)
		}
		if err := e.expect(5); err != nil {
			return err
		}
		return e.send(6) // B closes only now: a TrySend after its close sees the peer gone
	})
}

func holdB(e *peerEnv) error {
	tr, err := e.open()
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := e.expect(1); err != nil {
		return err
	}
	w := newWaiter()
	var blks []wire.Block
	for i := 0; i < 3; i++ {
		b, err := receiveWait(w, tr, e.deadline)
		if err != nil || b.Seq != uint32(i) || b.Payload[0] != byte(i) {
			return fmt.Errorf("block %d: %+v %v", i, b.BlockHeader, err)
		}
		blks = append(blks, b)
	}
	tr.Release(blks[2])
	tr.Release(blks[1])
	if s := tr.Stats(); s.AcksSent != 0 {
		return fmt.Errorf("acknowledged with block 0 held: %+v", s)
	}
	if err := e.send(2); err != nil {
		return err
	}
	if err := e.expect(3); err != nil {
		return err
	}
	tr.Release(blks[0])
	for i := 3; i < 6; i++ {
		b, err := receiveWait(w, tr, e.deadline)
		if err != nil || b.Seq != uint32(i) || b.Payload[0] != byte(i) {
			return fmt.Errorf("block %d: %+v %v", i, b.BlockHeader, err)
		}
	}
	if s := tr.Stats(); s.AcksSent != 1 {
		return fmt.Errorf("%d acknowledgements, want 1: %+v", s.AcksSent, s)
	}
	if err := e.send(5); err != nil {
		return err
	}
	return e.expect(6) // A's last TrySend is done
}

// The killed case: B streams to A and never reads; A fills its ring
// towards B and sleeps for space while it receives; A then kills B. Both
// of A's waits end with wire.ErrPeerGone, and every block A received
// before is intact and in order.
func TestPeerKilledCrossProcess(t *testing.T) {
	runPeer(t, "killed", Config{Blocks: 8, BlockSize: 512}, 0, 0, func(e *peerEnv, proc *peerProc) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		if err := e.expect(1); err != nil {
			return err
		}
		sendErr := make(chan error, 1)
		go func() {
			w := newWaiter()
			var err error
			for i := uint32(0); err == nil; i++ {
				err = sendWait(w, tr, dataHeader(4, i), []byte("towards a peer that never reads"), e.deadline)
			}
			sendErr <- err
		}()
		w := newWaiter()
		got := 0
		for ; got < 50; got++ {
			b, err := receiveWait(w, tr, e.deadline)
			if err != nil || b.Seq != uint32(got) || !intact(b) {
				return fmt.Errorf("block %d: %+v %v", got, b.BlockHeader, err)
			}
			tr.Release(b)
		}
		for tr.Stats().SendFull == 0 { // the sender found the ring full (and sleeps or will)
			if time.Now().After(e.deadline) {
				return fmt.Errorf("the sender never filled the ring")
			}
			time.Sleep(time.Millisecond)
		}
		proc.killOnPurpose()
		for {
			b, err := receiveWait(w, tr, e.deadline)
			if err != nil {
				if !errors.Is(err, wire.ErrPeerGone) {
					return fmt.Errorf("receive after the peer died: %v, want ErrPeerGone", err)
				}
				break
			}
			if b.Seq != uint32(got) || !intact(b) {
				return fmt.Errorf("block %d after the kill: %+v", got, b.BlockHeader)
			}
			got++
			tr.Release(b)
		}
		if err := <-sendErr; !errors.Is(err, wire.ErrPeerGone) {
			return fmt.Errorf("send after the peer died: %v, want ErrPeerGone", err)
		}
		return nil
	})
}

func killedB(e *peerEnv) error {
	tr, err := e.open()
	if err != nil {
		return err
	}
	if err := e.send(1); err != nil {
		return err
	}
	w := newWaiter()
	p := make([]byte, tr.MaxPayload())
	for i := uint32(0); ; i++ {
		pattern(p[:1+i%uint32(len(p))], 5, i)
		if err := sendWait(w, tr, dataHeader(5, i), p[:1+i%uint32(len(p))], e.deadline); err != nil {
			return err // killed before this
		}
	}
}

// The close case: B sends blocks, A confirms them, B closes; A receives
// the end (wire.ErrPeerGone) and its sends fail.
func TestPeerCloseCrossProcess(t *testing.T) {
	runPeer(t, "close", Config{Blocks: 4, BlockSize: 256}, 0, 0, func(e *peerEnv, _ *peerProc) error {
		tr, err := e.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		w := newWaiter()
		for i := 0; i < 10; i++ {
			b, err := receiveWait(w, tr, e.deadline)
			if err != nil || b.Seq != uint32(i) || !intact(b) {
				return fmt.Errorf("block %d: %+v %v", i, b.BlockHeader, err)
			}
			tr.Release(b)
		}
		if err := e.send(1); err != nil {
			return err
		}
		if _, err := receiveWait(w, tr, e.deadline); !errors.Is(err, wire.ErrPeerGone) {
			return fmt.Errorf("receive after the peer closed: %v, want ErrPeerGone", err)
		}
		if ok, err := tr.TrySend(dataHeader(1, 0), []byte("x")); ok || !errors.Is(err, wire.ErrPeerGone) {
			return fmt.Errorf("send after the peer closed: %v %v", ok, err)
		}
		return nil
	})
}

func closeB(e *peerEnv) error {
	tr, err := e.open()
	if err != nil {
		return err
	}
	defer tr.Close()
	w := newWaiter()
	p := make([]byte, 100)
	for i := uint32(0); i < 10; i++ {
		pattern(p, 3, i)
		if err := sendWait(w, tr, dataHeader(3, i), p, e.deadline); err != nil {
			return err
		}
	}
	if err := e.expect(1); err != nil {
		return err
	}
	return tr.Close()
}
