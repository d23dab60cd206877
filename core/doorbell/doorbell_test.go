package doorbell_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/doorbell"
	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

const testBells = 2

// bellPair establishes a link and puts Bells on both sides: boards at
// offset 0 of each side's region, a counter word at offset 512.
func bellPair(t *testing.T) (a, b *linkSide, ba, bb *doorbell.Bells) {
	t.Helper()
	a, b, errA, errB := establishPair(t, testSetupConfig(), testSetupConfig())
	if errA != nil || errB != nil {
		t.Fatalf("Establish: %v / %v", errA, errB)
	}
	mk := func(s *linkSide) *doorbell.Bells {
		n := doorbell.BellBoardSize(testBells)
		peer := s.Peer
		peer.Len = uint64(n)
		bells, err := doorbell.NewBells(doorbell.BellConfig{
			Link: s.Link, Bells: testBells, Board: s.Region.Bytes()[:n], PeerBoard: peer,
			Scratch: s.Scratch, ScratchOff: 0,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bells.Close() })
		return bells
	}
	return a, b, mk(a), mk(b)
}

// bump adds one to the counter word in the peer's region, visibly.
func bump(t *testing.T, s *linkSide, v uint64) {
	binary.LittleEndian.PutUint64(s.Scratch.Bytes()[64:], v)
	wr := &verbs.SendRequest{Op: verbs.OpWrite, SGEs: []verbs.SGE{{Key: s.Scratch.LocalKey(), Offset: 64, Length: 8}},
		RemoteAddr: s.Peer.At(512), RemoteKey: s.Peer.Key}
	if err := s.Link.PostData(wr, true); err != nil {
		t.Error(err)
	}
}

func counter(s *linkSide) uint64 { return sharedmem.Uint64At(s.Region.Bytes(), 512).Load() }

func TestDoorbellUnarmedTimesOut(t *testing.T) {
	_, _, ba, bb := bellPair(t)
	if err := bb.Ring(0); err != nil {
		t.Fatal(err)
	}
	h := ba.Doorbell(0)
	if err := h.Arm(); err != nil {
		t.Fatal(err)
	}
	if err := h.Sleep(time.Now().Add(30 * time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Sleep without a ring: %v", err)
	}
}

func TestDoorbellRingWakesAllSleepers(t *testing.T) {
	_, _, ba, bb := bellPair(t)
	var armed, woke sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		armed.Add(1)
		woke.Add(1)
		go func() {
			defer woke.Done()
			h := ba.Doorbell(1)
			err := h.Arm()
			armed.Done()
			if err == nil {
				err = h.Sleep(time.Now().Add(10 * time.Second))
			}
			errs <- err
		}()
	}
	armed.Wait()
	if err := bb.Ring(0); err != nil { // the other bell: nobody wakes
		t.Fatal(err)
	}
	if err := bb.Ring(1); err != nil {
		t.Fatal(err)
	}
	woke.Wait()
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Errorf("sleeper %d: %v", i, err)
		}
	}
}

// TestDoorbellNoLostWakeup runs many arm/check/sleep rounds against a
// peer that makes progress and rings at random moments; a lost wakeup
// shows as a deadline error.
func TestDoorbellNoLostWakeup(t *testing.T) {
	a, b, ba, bb := bellPair(t)
	const rounds = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := uint64(1); v <= rounds; v++ {
			for counter(a) < v-1 { // wait for the sleeper's acknowledgement
				if t.Failed() {
					return
				}
			}
			bump(t, a, v)
			if err := ba.Ring(0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	w := wait.NewWaiter(wait.EventPolicy{})
	for v := uint64(1); v <= rounds; v++ {
		err := w.Wait(func() bool { return counter(b) >= v }, bb.Doorbell(0), time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("round %d: %v", v, err)
		}
		bump(t, b, v) // acknowledge in a's region
	}
	<-done
	if s := w.Stats(); s.Sleeps == 0 {
		t.Logf("waiter never slept: %+v", s)
	}
}

func TestDoorbellCloseEndsSleepers(t *testing.T) {
	_, _, ba, bb := bellPair(t)
	local, remote := make(chan error, 1), make(chan error, 1)
	for _, x := range []struct {
		bells *doorbell.Bells
		ch    chan error
	}{{ba, local}, {bb, remote}} {
		h := x.bells.Doorbell(0)
		if err := h.Arm(); err != nil {
			t.Fatal(err)
		}
		go func() { x.ch <- h.Sleep(time.Now().Add(10 * time.Second)) }()
	}
	time.Sleep(10 * time.Millisecond) // let both reach the poll (not required for correctness)
	ba.Close()
	if err := <-local; !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("local sleeper: %v, want ErrClosed", err)
	}
	if err := <-remote; !errors.Is(err, wire.ErrPeerGone) {
		t.Errorf("peer's sleeper: %v, want ErrPeerGone", err)
	}
	if !bb.PeerClosed() {
		t.Error("peer does not see the closed word")
	}
}

func TestDoorbellCombinedAndInterrupt(t *testing.T) {
	_, _, ba, bb := bellPair(t)
	h := ba.Doorbell(0, 1)
	if err := h.Arm(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Sleep(time.Now().Add(10 * time.Second)) }()
	if err := bb.Ring(1); err != nil { // either bell wakes a combined handle
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("combined handle: %v", err)
	}
	h = ba.Doorbell(0)
	if err := h.Arm(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- h.Sleep(time.Now().Add(10 * time.Second)) }()
	time.Sleep(5 * time.Millisecond) // usually asleep in poll by now; either way it must wake
	ba.Interrupt()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted sleep: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Interrupt did not end the sleep")
	}
}

func TestDoorbellMessages(t *testing.T) {
	a, b, errA, errB := establishPair(t, testSetupConfig(), testSetupConfig())
	if errA != nil || errB != nil {
		t.Fatalf("Establish: %v / %v", errA, errB)
	}
	got := make(chan string, 4)
	n := doorbell.BellBoardSize(1)
	peer := a.Peer
	peer.Len = uint64(n)
	ba, err := doorbell.NewBells(doorbell.BellConfig{
		Link: a.Link, Bells: 1, Board: a.Region.Bytes()[:n], PeerBoard: peer, Scratch: a.Scratch,
		Messages: a.Scratch, MessagesOff: 1024,
		OnMessage: func(c verbs.Completion, p []byte) error {
			got <- fmt.Sprintf("%v imm=%d %q", c.Op, c.Imm, p)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	copy(b.Scratch.Bytes()[256:], "ack:0042")
	send := &verbs.SendRequest{Op: verbs.OpSend, Flags: verbs.SendInline, SGEs: []verbs.SGE{{Key: b.Scratch.LocalKey(), Offset: 256, Length: 8}}}
	imm := &verbs.SendRequest{Op: verbs.OpWriteWithImm, Imm: 100, Flags: verbs.SendInline,
		SGEs: []verbs.SGE{{Key: b.Scratch.LocalKey(), Offset: 256, Length: 8}}, RemoteAddr: b.Peer.At(2048), RemoteKey: b.Peer.Key}
	for _, wr := range []*verbs.SendRequest{send, imm} {
		if err := b.Link.PostBell(wr); err != nil {
			t.Fatal(err)
		}
	}
	h := ba.Doorbell(0)
	want := []string{`RECV imm=0 "ack:0042"`, `RECV_WITH_IMM imm=100 ""`}
	for _, w := range want {
		deadline := time.Now().Add(10 * time.Second)
		for len(got) == 0 && time.Now().Before(deadline) {
			h.Arm() // drains the doorbell receive queue
			h.Disarm()
		}
		select {
		case g := <-got:
			if g != w {
				t.Errorf("got %s, want %s", g, w)
			}
		default:
			t.Fatalf("message %s never arrived", w)
		}
	}
}
