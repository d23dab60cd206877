package statusbyte

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// peerRoles are the peer process's behaviours, run after Open.
var peerRoles = map[string]func(*Transport){
	"status7": func(t *Transport) { rawWrite(t, t.lay.statusOff+2, []byte{7}) },
	"header-garbage": func(t *Transport) {
		rawWrite(t, t.lay.blocksOff+3*t.lay.size, []byte("definitely not a header"))
		rawWrite(t, t.lay.statusOff+3, []byte{1})
	},
	"header-long": func(t *Transport) {
		var h [wire.HeaderSize]byte
		wire.BlockHeader{Stream: 1, Len: 1 << 20, Flags: wire.FlagData}.Encode(h[:]) // checksummed, too long
		rawWrite(t, t.lay.blocksOff, h[:])
		rawWrite(t, t.lay.statusOff, []byte{1})
	},
	"padding": func(t *Transport) { rawWrite(t, t.lay.statusOff+t.lay.blocks, []byte{1}) },
	"claim-free": func(t *Transport) {
		// As receiver, show status 1 for a block the sender never wrote.
		sharedmem.StoreByte(t.status, 5, 1)
	},
	"spray": func(t *Transport) {
		rng := rand.New(rand.NewPCG(7, 7))
		buf := make([]byte, 64)
		for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
			n := 1 + rng.IntN(len(buf))
			for i := range buf[:n] {
				buf[i] = byte(rng.IntN(4)) // mostly plausible status values
			}
			off := rng.IntN(t.lay.recvLen - n)
			if rawWrite(t, off, buf[:n]) != nil {
				return
			}
		}
	},
	"flood": func(t *Transport) {
		p := make([]byte, t.MaxPayload())
		w := wait.NewWaiter(wait.HybridPolicy{Spin: 256})
		for seq := uint32(0); ; seq++ {
			var err error
			w.Wait(func() bool {
				var ok bool
				ok, err = t.TrySend(wire.BlockHeader{Stream: 1, Seq: seq, Flags: wire.FlagData}, p)
				return ok || err != nil
			}, t.SpaceBell(), time.Now().Add(testDeadline))
			if err != nil {
				return
			}
		}
	},
}

// receiveErr receives (releasing) until an error or the deadline.
func receiveErr(t *testing.T, tr *Transport) error {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	for {
		b, err := receiveWait(tr, deadline)
		if err != nil {
			return err
		}
		tr.Release(b)
	}
}

func TestHostileReceiver(t *testing.T) {
	for _, role := range []string{"status7", "header-garbage", "header-long", "padding"} {
		t.Run(role, func(t *testing.T) {
			tr, pp := startPeer(t, role)
			pp.awaitActed(t)
			if err := receiveErr(t, tr); !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("got %v, want ErrProtocol", err)
			}
			if _, _, err := tr.Receive(); !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("after the violation Receive returns %v", err)
			}
		})
	}
}

func TestHostileSender(t *testing.T) {
	tr, pp := startPeer(t, "claim-free")
	pp.awaitActed(t)
	if err := tr.Refresh(); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("Refresh: %v, want ErrProtocol", err)
	}
	if _, err := tr.TrySend(wire.BlockHeader{Stream: 1, Flags: wire.FlagData}, []byte("x")); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("TrySend after the violation: %v", err)
	}
}

func TestHostileSpray(t *testing.T) {
	tr, pp := startPeer(t, "spray")
	pp.awaitActed(t)
	err := receiveErr(t, tr)
	if !errors.Is(err, wire.ErrProtocol) && !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("got %v, want ErrProtocol (or ErrPeerGone when the closed word was hit)", err)
	}
	t.Logf("spray ended the receiver with: %v", err)
}

func TestPeerKilled(t *testing.T) {
	tr, pp := startPeer(t, "flood")
	for i := 0; i < 100; i++ {
		tr.Release(mustReceive(t, tr))
	}
	pp.cmd.Process.Signal(syscall.SIGKILL)
	if err := receiveErr(t, tr); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("receiver: %v, want ErrPeerGone", err)
	}
	deadline := time.Now().Add(testDeadline)
	for {
		_, err := tr.TrySend(wire.BlockHeader{Stream: 2, Flags: wire.FlagData}, []byte("x"))
		if err != nil {
			if !errors.Is(err, wire.ErrPeerGone) {
				t.Fatalf("sender: %v, want ErrPeerGone", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sends to a killed peer keep succeeding")
		}
	}
	w := wait.NewWaiter(wait.EventPolicy{})
	if err := w.Wait(func() bool { return false }, tr.DataBell(), time.Now().Add(testDeadline)); !errors.Is(err, wire.ErrPeerGone) {
		t.Fatalf("sleep on a killed peer: %v", err)
	}
}
