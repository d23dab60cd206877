package mux_test

import (
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
)

// Waiting across processes: the echo peer is another process (the test
// binary re-executed, mux_peer_test.go), so the doorbells ring through
// the shared-memory provider as in production. Run under -race by make
// test.

// TestWaiterProcNoLostWakeup ping-pongs with an echo peer whose waiters
// use mode, with random pauses on this side so that the request lands
// before, during and after the peer's arm and re-check, and the reply
// before, during and after ours. A lost wakeup shows as a read that
// reaches its deadline.
func TestWaiterProcNoLostWakeup(t *testing.T) {
	rounds := 600
	if testing.Short() {
		rounds = 200
	}
	for _, mode := range []string{wait.WaitModeEvent, wait.WaitModeHybrid, wait.WaitModeAdaptive} {
		t.Run(mode, func(t *testing.T) {
			ch, tr, _ := startMuxPeer(t, "bench-echo:"+mode)
			s, err := ch.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rng := rand.New(rand.NewPCG(uint64(len(mode)), 11))
			msg, got := make([]byte, 16), make([]byte, 16)
			for i := range rounds {
				procJitter(rng)
				msg[0], msg[1] = byte(i), byte(i>>8)
				if _, err := s.Write(msg); err != nil {
					t.Fatalf("round %d: write: %v", i, err)
				}
				procJitter(rng)
				s.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.ReadFull(s, got); err != nil {
					t.Fatalf("round %d: %v (a deadline here is a lost wakeup)", i, err)
				}
				if got[0] != msg[0] || got[1] != msg[1] {
					t.Fatalf("round %d: echoed %x, want %x", i, got[:2], msg[:2])
				}
			}
			st := tr.Stats()
			t.Logf("%s: %d rounds, %d rings posted to the peer", mode, rounds, st.BellRings)
			if mode == wait.WaitModeEvent && st.BellRings == 0 {
				t.Errorf("event mode: the peer never armed (no rings): the sleeping path was not tested")
			}
		})
	}
}

// TestDoorbellProcBusyPeerTakesNoRings: a peer that polls (busy) never
// arms, so this side, sending it thousands of blocks, posts no ring: a
// doorbell costs nothing while the receiver polls.
func TestDoorbellProcBusyPeerTakesNoRings(t *testing.T) {
	ch, tr, _ := startMuxPeer(t, "bench-echo:"+wait.WaitModeBusy)
	s, err := ch.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(muxDeadline))
	msg, got := make([]byte, 32), make([]byte, 32)
	const rounds = 2000
	for i := range rounds {
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, got); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if st := tr.Stats(); st.BellRings != 0 || st.BlocksSent < rounds {
		t.Errorf("%d rings posted for %d blocks sent to a polling peer, want 0", st.BellRings, st.BlocksSent)
	}
}

// procJitter pauses by nothing, a yield or a short sleep.
func procJitter(rng *rand.Rand) {
	switch rng.IntN(6) {
	case 0, 1, 2:
	case 3:
		for range rng.IntN(2000) {
			_ = rng.Uint32()
		}
	case 4:
		time.Sleep(0)
	case 5:
		time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
	}
}
