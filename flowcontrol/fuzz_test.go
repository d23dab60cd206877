package flowcontrol_test

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// FuzzController decodes an algorithm, its parameters and a sequence of
// operations (writes, sends, reads, record deliveries, hostile records)
// from data, runs them over the link model and drains it: every byte must
// arrive once, in order, within the algorithm's bounds, without deadlock.
func FuzzController(f *testing.F) {
	f.Add([]byte{0, 3, 15, 2, 0, 3, 0, 40, 1, 1, 2, 3, 0, 200, 1, 2, 3})
	f.Add([]byte{1, 0, 7, 0, 0, 0, 0, 255, 0, 255, 1, 1, 1, 2, 2})
	f.Add([]byte{2, 0, 15, 3, 9, 5, 0, 100, 1, 4, 2, 0, 0, 1, 1, 2, 3, 1})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 4, 1, 255, 255, 255, 255, 0, 9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		name := flowcontrol.Names()[int(next())%3]
		payload := 1 + int(next())%32
		blocks := 1 + int(next())%8
		slots := 1 + int(next())%6
		p := flowcontrol.Params{
			Credits:         1 + int(next())%blocks,
			ReceiveCapacity: payload * blocks,
			BlockPayload:    payload,
		}
		p.VirtualWindow = 1 + int(next())%p.ReceiveCapacity
		l := newLink(t, name, p, slots)
		for len(data) > 0 {
			switch next() % 5 {
			case 0:
				l.write(1 + int(next()))
			case 1:
				l.send()
			case 2:
				l.consume()
			case 3:
				l.deliver()
			case 4:
				kind := wire.ControlKind(next() % 4)
				v := uint32(next())<<24 | uint32(next())<<16 | uint32(next())<<8 | uint32(next())
				l.hostile(wire.ControlRecord{Kind: kind, Value: v})
			}
		}
		l.drain()
	})
}
