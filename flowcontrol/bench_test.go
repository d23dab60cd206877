package flowcontrol_test

import (
	"testing"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

// BenchmarkPerBlock measures a controller's cost per block: the sender's
// NextSegment and Sent, the receiver's Arrived and Consumed, and the
// sender's OnControl for each record that comes back.
func BenchmarkPerBlock(b *testing.B) {
	const payload = 8 << 10
	p := flowcontrol.Params{Credits: 16, VirtualWindow: 64 << 10, ReceiveCapacity: 64 * payload, BlockPayload: payload}
	for _, name := range flowcontrol.Names() {
		b.Run(name, func(b *testing.B) {
			snd, rcv := newController(b, name, p), newController(b, name, p)
			for _, rec := range rcv.Open() {
				if err := snd.OnControl(rec); err != nil {
					b.Fatal(err)
				}
			}
			arrive := rcv
			b.ReportAllocs()
			for b.Loop() {
				n := snd.NextSegment(1<<20, 1<<20, payload)
				snd.Sent(n)
				if err := arrive.Arrived(n); err != nil {
					b.Fatal(err)
				}
				if rec, ok := rcv.Consumed(n); ok {
					if err := snd.OnControl(rec); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.SetBytes(payload)
		})
	}
}
