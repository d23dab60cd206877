package mux

import (
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
)

func TestStreamIDs(t *testing.T) {
	var d streamIDs
	d.init(false) // this side even, the peer odd
	if id, _ := d.alloc(); id != 2 {
		t.Fatalf("first own id %d", id)
	}
	steps := []struct {
		id   uint32
		want idClass
	}{
		{5, idNew},  // 1 and 3 become gaps
		{3, idNew},  // a gap fills
		{3, idGone}, // seen before: a deleted stream
		{1, idNew},
		{7, idNew},
		{5, idGone},
		{2, idGone},  // ours, opened: deleted
		{4, idBogus}, // ours, never opened
		{0, idBogus},
	}
	for _, s := range steps {
		got, err := d.classify(s.id)
		if got != s.want || (s.want == idBogus) != errors.Is(err, wire.ErrProtocol) {
			t.Fatalf("classify(%d) = %v, %v; want %v", s.id, got, err, s.want)
		}
	}
	if _, err := d.classify(7 + 2*(maxStreamGaps+2)); !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("a jump beyond the gap bound: %v", err)
	}
}
