package rdma

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func TestWorkRingRetiresUnsignaled(t *testing.T) {
	r := newWorkRing(4)
	for i := range 4 {
		if seq := r.push(ringSlot{id: uint64(100 + i), op: verbs.OpWrite}); seq != uint64(i) {
			t.Fatalf("push %d got seq %d", i, seq)
		}
	}
	if r.free() != 0 {
		t.Fatalf("full ring has %d free", r.free())
	}
	// Requests 0..1 were unsignaled; the completion of 2 retires them.
	s, ok := r.complete(2)
	if !ok || s.id != 102 || r.free() != 3 || r.outstanding() != 1 {
		t.Fatalf("complete(2) = %+v %v; free %d", s, ok, r.free())
	}
	if _, ok := r.complete(1); ok {
		t.Errorf("a retired request completed again")
	}
	if _, ok := r.complete(4); ok {
		t.Errorf("a request never posted completed")
	}
	r.push(ringSlot{id: 104})
	r.push(ringSlot{id: 105})
	r.unpush(1) // verbs refused the last one
	if r.outstanding() != 2 {
		t.Fatalf("outstanding %d, want 2", r.outstanding())
	}
	if s, ok := r.complete(4); !ok || s.id != 104 || r.outstanding() != 0 {
		t.Errorf("complete(4) after wrap = %+v %v", s, ok)
	}
}

func TestRefineStatus(t *testing.T) {
	if got := refineStatus(verbs.StatusLocalProtection, verbs.StatusLocalLength); got != verbs.StatusLocalLength {
		t.Errorf("got %v", got)
	}
	for _, st := range []verbs.Status{verbs.StatusFlushed, verbs.StatusRemoteAccess, verbs.StatusSuccess, verbs.StatusLocalLength} {
		if got := refineStatus(st, verbs.StatusLocalLength); got != st {
			t.Errorf("refineStatus(%v) = %v", st, got)
		}
	}
	if got := refineStatus(verbs.StatusLocalProtection, verbs.StatusSuccess); got != verbs.StatusLocalProtection {
		t.Errorf("no hint: %v", got)
	}
}

// FuzzWorkRing drives the ring with decoded operations and compares it to
// a plain slice of outstanding requests.
func FuzzWorkRing(f *testing.F) {
	f.Add(uint8(4), []byte{0, 0, 0, 1, 2, 0, 3})
	f.Add(uint8(1), []byte{0, 0, 2, 1, 1, 0})
	f.Fuzz(func(t *testing.T, depth uint8, ops []byte) {
		d := int(depth%16) + 1
		r := newWorkRing(d)
		var model []uint64 // outstanding caller IDs, oldest first
		base := uint64(0)  // sequence number of model[0]
		next := uint64(1000)
		for _, op := range ops {
			switch op % 4 {
			case 0, 1: // push
				if r.free() != d-len(model) {
					t.Fatalf("free %d, model %d of %d", r.free(), len(model), d)
				}
				if len(model) == d {
					continue
				}
				seq := r.push(ringSlot{id: next})
				if seq != base+uint64(len(model)) {
					t.Fatalf("push seq %d, want %d", seq, base+uint64(len(model)))
				}
				model = append(model, next)
				next++
			case 2: // complete the k-th outstanding
				if len(model) == 0 {
					if _, ok := r.complete(base); ok {
						t.Fatalf("completed on an empty ring")
					}
					continue
				}
				k := int(op/4) % len(model)
				s, ok := r.complete(base + uint64(k))
				if !ok || s.id != model[k] {
					t.Fatalf("complete(%d) = %+v %v, want id %d", base+uint64(k), s, ok, model[k])
				}
				model = model[k+1:]
				base += uint64(k + 1)
			case 3: // unpush
				if len(model) == 0 {
					continue
				}
				r.unpush(1)
				model = model[:len(model)-1]
			}
			if r.outstanding() != len(model) {
				t.Fatalf("outstanding %d, model %d", r.outstanding(), len(model))
			}
		}
	})
}
