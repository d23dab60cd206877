//go:build rdma && linux && cgo

package rdma

import (
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestBuildSendChain checks the C half of posting without a device: a
// chain translated into C memory and built into struct ibv_send_wr reads
// back as intended (links, SGE lists, opcodes, flags, immediate in
// network order, remote address and key).
func TestBuildSendChain(t *testing.T) {
	third := &verbs.SendRequest{ID: 3, Op: verbs.OpSend, HasImm: true, Imm: 0x11223344, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{{Key: 10, Offset: 8, Length: 4}, {Key: 11, Offset: 0, Length: 4}}}
	second := &verbs.SendRequest{ID: 2, Op: verbs.OpWriteWithImm, Imm: 0xa0b0c0d0, RemoteAddr: 0x5000, RemoteKey: 77, Next: third}
	first := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Flags: verbs.SendInline | verbs.SendSignaled,
		SGEs: []verbs.SGE{{Key: 10, Offset: 16, Length: 8}}, RemoteAddr: 0x4000, RemoteKey: 66, Next: second}
	got, bad, err := buildSendChain(first, testLimits, testRegions)
	if err != nil {
		t.Fatalf("build: %v (bad %p)", err, bad)
	}
	if len(got) != 3 {
		t.Fatalf("built %d requests, want 3", len(got))
	}
	want := []builtSend{
		{ID: 0, Next: 1, SGE: 0, NumSGE: 1, Opcode: ibvWRRDMAWrite, Flags: ibvSendInline | ibvSendSignaled,
			RemoteAddr: 0x4000, RKey: 66, SGEs: []wireSGE{{Addr: 0x10000 + 16, Length: 8, LKey: 10}}},
		{ID: 1, Next: 2, SGE: -1, NumSGE: 0, Opcode: ibvWRRDMAWriteWithImm, Imm: 0xa0b0c0d0, RemoteAddr: 0x5000, RKey: 77},
		{ID: 2, Next: -1, SGE: 4, NumSGE: 2, Opcode: ibvWRSendWithImm, Flags: ibvSendSignaled, Imm: 0x11223344,
			SGEs: []wireSGE{{Addr: 0x10000 + 8, Length: 4, LKey: 10}, {Addr: 0x20000, Length: 4, LKey: 11}}},
	}
	for i := range want {
		g, w := got[i], want[i]
		gs, ws := g.SGEs, w.SGEs
		if !sameBuilt(g, w) || len(gs) != len(ws) {
			t.Errorf("request %d: %+v (SGEs %+v), want %+v (SGEs %+v)", i, g, gs, w, ws)
			continue
		}
		for k := range ws {
			if gs[k] != ws[k] {
				t.Errorf("request %d SGE %d: %+v, want %+v", i, k, gs[k], ws[k])
			}
		}
	}
}

// TestBuildSendChainStopsAtInvalid: the first invalid request of a chain
// is reported as the bad one.
func TestBuildSendChainStopsAtInvalid(t *testing.T) {
	badOne := &verbs.SendRequest{ID: 2, Op: verbs.OpRecv}
	chain := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Next: badOne}
	if _, bad, err := buildSendChain(chain, testLimits, testRegions); bad != badOne || !errors.Is(err, verbs.ErrInvalid) {
		t.Fatalf("bad %p err %v; want %p and ErrInvalid", bad, err, badOne)
	}
}

// sameBuilt compares everything but the SGE lists.
func sameBuilt(a, b builtSend) bool {
	a.SGEs, b.SGEs = nil, nil
	return a.ID == b.ID && a.Next == b.Next && a.SGE == b.SGE && a.NumSGE == b.NumSGE &&
		a.Opcode == b.Opcode && a.Flags == b.Flags && a.Imm == b.Imm && a.RemoteAddr == b.RemoteAddr && a.RKey == b.RKey
}
