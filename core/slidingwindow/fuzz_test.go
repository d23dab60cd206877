package slidingwindow

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
)

// FuzzTransport drives a sliding-window pair with operations decoded from
// the input and checks every answer against a trivial model: the list of
// blocks sent, how many were returned, and which of those were released.
//
// Each operation is two bytes, op and arg: try to send (length from arg),
// receive, release the (arg mod k)-th unreleased block, or send waiting
// for space when the model says an acknowledgement is due (room freed and
// every sent block returned, so the receiver has nothing left to do).
func FuzzTransport(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 0, 1, 0, 2, 1, 2, 0, 0, 3})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 0, 1, 0, 1, 0, 1, 0, 2, 3, 3, 0, 2, 0, 3, 0})
	f.Add([]byte{0, 9, 0, 9, 0, 9, 0, 9, 1, 0, 1, 0, 1, 0, 1, 0, 2, 0, 3, 0, 2, 2, 2, 0, 2, 0, 3, 0, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		const n = 4
		a, b := pair(t, Config{Blocks: n, BlockSize: 64})
		var sent []int       // payload length per block
		var got []wire.Block // returned, by block number
		released := map[int]bool{}
		tail := 0 // blocks freed in order
		advanceTail := func() {
			for tail < len(got) && released[tail] {
				tail++
			}
		}
		buf := make([]byte, a.MaxPayload())
		send := func(k int, arg byte, wait bool) bool {
			m := 1 + int(arg)%a.MaxPayload()
			pattern(buf[:m], 1, uint32(len(sent)))
			h := dataHeader(1, uint32(len(sent)))
			var ok bool
			var err error
			if wait {
				err = sendWait(newWaiter(), a, h, buf[:m], deadline())
				ok = err == nil
			} else {
				ok, err = a.TrySend(h, buf[:m])
			}
			if err != nil {
				t.Fatalf("op %d: send: %v", k, err)
			}
			if ok && len(sent)-tail >= n {
				t.Fatalf("op %d: sent block %d with %d blocks unfreed", k, len(sent), len(sent)-tail)
			}
			if ok {
				sent = append(sent, m)
			}
			return ok
		}
		for k := 0; k+1 < len(ops); k += 2 {
			op, arg := ops[k]%4, ops[k+1]
			switch op {
			case 0:
				send(k/2, arg, false)
			case 1: // receive, waiting when a block is due
				if len(got) == len(sent) {
					if _, ok, err := b.Receive(); ok || err != nil {
						t.Fatalf("op %d: receive with nothing sent: %v %v", k/2, ok, err)
					}
					continue
				}
				blk := mustReceive(t, b)
				if int(blk.Seq) != len(got) || int(blk.Len) != sent[len(got)] || !intact(blk) {
					t.Fatalf("op %d: got %+v, want block %d of %d bytes", k/2, blk.BlockHeader, len(got), sent[len(got)])
				}
				got = append(got, blk)
			case 2: // release
				var live []int
				for i := tail; i < len(got); i++ {
					if !released[i] {
						live = append(live, i)
					}
				}
				if len(live) == 0 {
					continue
				}
				i := live[int(arg)%len(live)]
				b.Release(got[i])
				released[i] = true
				advanceTail()
			case 3: // a send that must get room: the acknowledgement is due
				if len(sent)-tail < n && len(got) == len(sent) {
					send(k/2, arg, true)
				}
			}
		}
		if err := b.Refresh(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzWire checks the message decoder and the acknowledgement rule on
// arbitrary input: no panic, and an accepted tail moves forward without
// passing the head.
func FuzzWire(f *testing.F) {
	f.Add([]byte{msgAck, 0, 0, 0, 3, 0, 0, 0}, uint64(1), uint64(4))
	f.Add([]byte{msgClose, 0, 0, 0, 0, 0, 0, 0}, uint64(0), uint64(0))
	f.Add([]byte{msgAck, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, uint64(1<<32), uint64(1<<32+5))
	f.Fuzz(func(t *testing.T, p []byte, tail, span uint64) {
		span %= 1 << 13
		head := tail + span
		kind, v, err := decodeMsg(p)
		if err != nil {
			if !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("decode error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if len(p) < msgSize || p[0] != kind || binary.LittleEndian.Uint32(p[4:]) != v {
			t.Fatalf("decoded %d %d from %x", kind, v, p)
		}
		nt, err := advance(tail, head, v)
		if err != nil {
			if !errors.Is(err, wire.ErrProtocol) || nt != tail {
				t.Fatalf("advance error %v, tail %d", err, nt)
			}
			return
		}
		if nt <= tail || nt > head || uint32(nt) != v {
			t.Fatalf("advance(%d, %d, %d) = %d", tail, head, v, nt)
		}
	})
}
