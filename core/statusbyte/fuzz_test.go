package statusbyte

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
)

// modelBlock is a block in the model: sent, and maybe received and
// retained.
type modelBlock struct {
	stream, seq uint32
	n           int
	received    bool
	retained    bool
	blk         wire.Block
}

// FuzzChannel drives a status-byte channel with operations decoded from
// the input and compares every answer with a trivial model: a list of
// the blocks sent and not yet released.
//
// Each operation is two bytes, op and arg: send (stream arg%3+1, length
// from arg), receive, release or retain the (arg mod k)-th received block,
// refresh and compare Held/Retained per stream.
func FuzzChannel(f *testing.F) {
	f.Add([]byte{0, 10, 0, 20, 1, 0, 1, 0, 2, 0, 3, 1, 4, 0})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 0, 3, 0, 4, 0, 0, 6, 1, 0, 2, 1, 4, 0})
	f.Add([]byte{0, 255, 1, 0, 3, 0, 0, 7, 0, 8, 0, 9, 0, 10, 4, 0, 2, 0, 4, 0})
	f.Fuzz(runOps)
}

func runOps(t *testing.T, ops []byte) {
	{
		if len(ops) > 400 {
			ops = ops[:400]
		}
		const blocks = 4
		a, b := pair(t, Config{Blocks: blocks, BlockSize: 128})
		var live []*modelBlock // sent, not released
		var seq uint32
		buf := make([]byte, a.MaxPayload())
		for k := 0; k+1 < len(ops); k += 2 {
			op, arg := ops[k]%5, ops[k+1]
			switch op {
			case 0: // send
				stream := uint32(arg%3) + 1
				n := 1 + int(arg)%a.MaxPayload()
				pattern(buf[:n], stream, seq)
				ok, err := a.TrySend(wire.BlockHeader{Stream: stream, Seq: seq, Flags: wire.FlagData}, buf[:n])
				if err != nil {
					t.Fatalf("op %d send: %v", k/2, err)
				}
				if want := len(live) < blocks; ok != want {
					t.Fatalf("op %d send: ok=%v with %d blocks in use", k/2, ok, len(live))
				}
				if ok {
					live = append(live, &modelBlock{stream: stream, seq: seq, n: n})
					seq++
				}
			case 1: // receive
				blk, ok, err := b.Receive()
				if err != nil {
					t.Fatalf("op %d receive: %v", k/2, err)
				}
				var want *modelBlock
				for _, m := range live {
					if !m.received && ok && m.seq == blk.Seq {
						want = m
					}
				}
				pending := 0
				for _, m := range live {
					if !m.received {
						pending++
					}
				}
				if ok != (pending > 0) {
					t.Fatalf("op %d receive: ok=%v with %d blocks pending", k/2, ok, pending)
				}
				if !ok {
					continue
				}
				if want == nil || blk.Stream != want.stream || len(blk.Payload) != want.n {
					t.Fatalf("op %d receive: unexpected block %+v", k/2, blk.BlockHeader)
				}
				pattern(buf[:want.n], want.stream, want.seq)
				if sum(buf[:want.n]) != sum(blk.Payload) {
					t.Fatalf("op %d receive: payload of block %d corrupt", k/2, want.seq)
				}
				want.received, want.blk = true, blk
			case 2, 3: // release, retain
				var got []*modelBlock
				for _, m := range live {
					if m.received {
						got = append(got, m)
					}
				}
				if len(got) == 0 {
					continue
				}
				m := got[int(arg)%len(got)]
				if op == 3 {
					b.Retain(m.blk)
					m.retained = true
					continue
				}
				b.Release(m.blk)
				for i := range live {
					if live[i] == m {
						live = append(live[:i], live[i+1:]...)
						break
					}
				}
			case 4: // refresh and compare the sender's view
				if err := a.Refresh(); err != nil {
					t.Fatalf("op %d refresh: %v", k/2, err)
				}
				for s := uint32(1); s <= 3; s++ {
					want, ret := 0, false
					for _, m := range live {
						if m.stream == s {
							want++
							ret = ret || m.retained
						}
					}
					if held(a, s) != want || a.Retained(s) != ret {
						t.Fatalf("op %d stream %d: Held %d Retained %v, model %d %v", k/2, s, held(a, s), a.Retained(s), want, ret)
					}
				}
			}
		}
	}
}
