package flowcontrol_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// linkCase is a parameter set the random and edge tests run every
// algorithm over.
type linkCase struct {
	p     flowcontrol.Params
	slots int
}

var linkCases = []linkCase{
	{flowcontrol.Params{Credits: 1, VirtualWindow: 1, ReceiveCapacity: 16, BlockPayload: 16}, 1},
	{flowcontrol.Params{Credits: 3, VirtualWindow: 7, ReceiveCapacity: 64, BlockPayload: 16}, 2},
	{flowcontrol.Params{Credits: 4, VirtualWindow: 64, ReceiveCapacity: 64, BlockPayload: 16}, 4},
	{flowcontrol.Params{Credits: 8, VirtualWindow: 100, ReceiveCapacity: 256, BlockPayload: 32}, 8},
	{flowcontrol.Params{Credits: 16, VirtualWindow: 8, ReceiveCapacity: 512, BlockPayload: 32}, 3},
}

// runRandom applies n random operations, then drains the link.
func runRandom(t *testing.T, name string, c linkCase, seed uint64, n int) {
	rng := rand.New(rand.NewPCG(seed, 0x5d95))
	l := newLink(t, name, c.p, c.slots)
	for range n {
		switch op := rng.IntN(10); {
		case op < 3:
			l.write(1 + rng.IntN(3*c.p.BlockPayload))
		case op < 6:
			l.send()
		case op < 8:
			l.consume()
		case op < 9:
			l.deliver()
		default:
			l.hostile(wire.ControlRecord{Kind: wire.ControlKind(rng.IntN(4)), Value: rng.Uint32N(2 * uint32(c.p.ReceiveCapacity))})
		}
	}
	l.drain()
}

func TestRandomOperations(t *testing.T) {
	for _, name := range flowcontrol.Names() {
		for i, c := range linkCases {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				for seed := range uint64(20) {
					runRandom(t, name, c, seed, 2000)
				}
			})
		}
	}
}

// TestProgressOnceConsumed: whatever the sender holds goes out once the
// reader consumes, with the smallest channel and one block of credit or
// window at a time.
func TestProgressOnceConsumed(t *testing.T) {
	for _, name := range flowcontrol.Names() {
		for i, c := range linkCases {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				l := newLink(t, name, c.p, c.slots)
				for range 50 {
					if !l.write(5 * c.p.BlockPayload) {
						l.drain()
					}
				}
				l.drain()
				if len(l.delivered) == 0 {
					t.Fatal("nothing delivered")
				}
			})
		}
	}
}
