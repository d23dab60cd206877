package mux_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wire"
)

// TestProcEcho: many streams in parallel to an echo peer in another
// process, random sizes and write/read interleavings, checksums.
func TestProcEcho(t *testing.T) {
	ch, _, _ := startMuxPeer(t, "echo")
	const streams = 24
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			size, maxWrite, maxRead := rng.IntN(300<<10), 1+rng.IntN(20000), 1+rng.IntN(9000)
			s, err := ch.Open()
			if err != nil {
				t.Errorf("stream %d: open: %v", i, err)
				return
			}
			defer s.Close()
			sums := make(chan uint32, 1)
			go func() {
				sum, err := sendRandom(s, uint64(i), size, maxWrite)
				if err == nil {
					err = s.CloseWrite()
				}
				if err != nil {
					t.Errorf("stream %d: send: %v", i, err)
				}
				sums <- sum
			}()
			n, got, err := recvAll(s, uint64(i), maxRead)
			if want := <-sums; err != nil || n != size || got != want {
				t.Errorf("stream %d: echoed %d of %d bytes, sum %#x want %#x: %v", i, n, size, got, want, err)
			}
		}()
	}
	wg.Wait()
}

// TestProcPeerKilled: the peer is SIGKILLed while it streams to us: the
// reader and the writer get ErrPeerGone, nothing hangs.
func TestProcPeerKilled(t *testing.T) {
	ch, _, cmd := startMuxPeer(t, "flood")
	s, err := ch.Accept(time.Now().Add(muxDeadline))
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(muxDeadline))
	buf := make([]byte, 64<<10)
	for got := 0; got < 4<<20; {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	cmd.Process.Signal(syscall.SIGKILL)
	var rerr error
	for rerr == nil {
		_, rerr = s.Read(buf)
	}
	if !errors.Is(rerr, wire.ErrPeerGone) {
		t.Fatalf("reader: %v, want ErrPeerGone", rerr)
	}
	if _, err := s.Write(buf); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("writer: %v, want ErrPeerGone", err)
	}
	if _, err := ch.Open(); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("open: %v, want ErrPeerGone", err)
	}
}

// TestProcHostilePeer: a peer that writes blocks no channel would send
// ends the channel with ErrProtocol, and blocked calls return.
func TestProcHostilePeer(t *testing.T) {
	for _, role := range []string{"duplicate", "bogus-id", "far-seq", "credit-overflow", "after-fin"} {
		t.Run(role, func(t *testing.T) {
			ch, _, _ := startMuxPeer(t, role)
			_, err := ch.Accept(time.Now().Add(muxDeadline))
			for err == nil { // streams the peer opened before misbehaving
				_, err = ch.Accept(time.Now().Add(muxDeadline))
			}
			if !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("got %v, want ErrProtocol", err)
			}
		})
	}
}

// TestProcEchoSmall is a smoke check that small messages round-trip
// one at a time (no batching needed for progress).
func TestProcEchoSmall(t *testing.T) {
	ch, _, _ := startMuxPeer(t, "echo")
	s, err := ch.Open()
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(muxDeadline))
	msg, got := []byte("ping"), make([]byte, 4)
	for i := 0; i < 500; i++ {
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
			t.Fatalf("round %d: %q %v", i, got, err)
		}
	}
}
