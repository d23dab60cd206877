package rdma

import (
	"errors"
	"math"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

var testLimits = limits{maxSend: 8, maxRecv: 8, maxInline: 64, maxSGE: 2}

// testRegions: key 10 is 4096 bytes at 0x10000, key 11 is 100 bytes at
// 0x20000.
var testRegions = regionSet{
	10: {base: 0x10000, size: 4096},
	11: {base: 0x20000, size: 100},
}

func sendOne(t *testing.T, wr *verbs.SendRequest) (wireSend, []wireSGE, verbs.Status, error) {
	t.Helper()
	var w wireSend
	sges := make([]wireSGE, testLimits.maxSGE)
	hint, err := translateSend(wr, testLimits, testRegions, 42, &w, sges, 6)
	return w, sges, hint, err
}

func TestTranslateSendPostTimeErrors(t *testing.T) {
	sge := verbs.SGE{Key: 10, Length: 8}
	for name, wr := range map[string]*verbs.SendRequest{
		"opcode 0":             {Op: 0},
		"opcode RECV":          {Op: verbs.OpRecv},
		"opcode RECV_WITH_IMM": {Op: verbs.OpRecvWithImm},
		"opcode 200":           {Op: 200},
		"too many SGEs":        {Op: verbs.OpWrite, SGEs: []verbs.SGE{sge, sge, sge}},
		"inline READ":          {Op: verbs.OpRead, Flags: verbs.SendInline, SGEs: []verbs.SGE{sge}},
		"inline too large": {Op: verbs.OpSend, Flags: verbs.SendInline,
			SGEs: []verbs.SGE{{Key: 10, Length: 40}, {Key: 10, Offset: 40, Length: 25}}},
		"inline length overflows": {Op: verbs.OpWrite, Flags: verbs.SendInline,
			SGEs: []verbs.SGE{{Key: 10, Length: math.MaxUint32}, {Key: 10, Length: math.MaxUint32}}},
	} {
		if _, _, _, err := sendOne(t, wr); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func TestTranslateSendWrite(t *testing.T) {
	wr := &verbs.SendRequest{ID: 7, Op: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGEs:       []verbs.SGE{{Key: 10, Offset: 100, Length: 32}, {Key: 11, Offset: 68, Length: 32}},
		RemoteAddr: 0xdead0000, RemoteKey: 99, Imm: 5}
	w, sges, hint, err := sendOne(t, wr)
	if err != nil || hint != verbs.StatusSuccess {
		t.Fatalf("translate: hint %v, err %v", hint, err)
	}
	want := wireSend{ID: 42, RemoteAddr: 0xdead0000, RKey: 99, SGE: 6, NumSGE: 2,
		Opcode: ibvWRRDMAWrite, Flags: ibvSendSignaled | ibvSendInline}
	if w != want {
		t.Errorf("wire request %+v, want %+v (Imm only for *_WITH_IMM)", w, want)
	}
	if sges[0] != (wireSGE{Addr: 0x10000 + 100, Length: 32, LKey: 10}) || sges[1] != (wireSGE{Addr: 0x20000 + 68, Length: 32, LKey: 11}) {
		t.Errorf("SGEs %+v", sges)
	}
}

func TestTranslateSendImmAndSend(t *testing.T) {
	w, _, _, err := sendOne(t, &verbs.SendRequest{Op: verbs.OpWriteWithImm, Imm: 0x01020304, RemoteAddr: 1, RemoteKey: 2})
	if err != nil || w.Opcode != ibvWRRDMAWriteWithImm || w.Imm != 0x01020304 || w.NumSGE != 0 {
		t.Errorf("WRITE_WITH_IMM: %+v, %v", w, err)
	}
	w, _, _, err = sendOne(t, &verbs.SendRequest{Op: verbs.OpSend, HasImm: true, Imm: 9, RemoteAddr: 1, RemoteKey: 2})
	if err != nil || w.Opcode != ibvWRSendWithImm || w.Imm != 9 || w.RemoteAddr != 0 || w.RKey != 0 {
		t.Errorf("SEND with imm: %+v, %v", w, err)
	}
	w, _, _, err = sendOne(t, &verbs.SendRequest{Op: verbs.OpSend, Imm: 9, Flags: verbs.SendFence})
	if err != nil || w.Opcode != ibvWRSend || w.Imm != 0 || w.Flags != ibvSendFence {
		t.Errorf("SEND: %+v, %v", w, err)
	}
}

// Requests whose SGEs the device must refuse pass translation (they are
// completion errors, not post errors), with address 0, no inline, and
// the status the completion must report.
func TestTranslateSendBadSGEs(t *testing.T) {
	for _, c := range []struct {
		name string
		sge  verbs.SGE
		want verbs.Status
	}{
		{"unknown key", verbs.SGE{Key: 12, Length: 16}, verbs.StatusLocalProtection},
		{"past the end", verbs.SGE{Key: 10, Offset: 4090, Length: 16}, verbs.StatusLocalLength},
		{"offset at the end", verbs.SGE{Key: 10, Offset: 4096, Length: 1}, verbs.StatusLocalLength},
		{"offset overflows", verbs.SGE{Key: 10, Offset: math.MaxUint64 - 7, Length: 16}, verbs.StatusLocalLength},
		{"past a small region", verbs.SGE{Key: 11, Offset: 96, Length: 8}, verbs.StatusLocalLength},
	} {
		w, sges, hint, err := sendOne(t, &verbs.SendRequest{Op: verbs.OpWrite, Flags: verbs.SendInline | verbs.SendSignaled, SGEs: []verbs.SGE{c.sge}})
		if err != nil {
			t.Errorf("%s: post-time error %v, want none", c.name, err)
			continue
		}
		if hint != c.want {
			t.Errorf("%s: hint %v, want %v", c.name, hint, c.want)
		}
		if sges[0].Addr != 0 || sges[0].LKey != c.sge.Key || sges[0].Length != c.sge.Length {
			t.Errorf("%s: SGE %+v, want address 0 with the caller's key and length", c.name, sges[0])
		}
		if w.Flags != ibvSendSignaled {
			t.Errorf("%s: flags %#x, want signaled without inline", c.name, w.Flags)
		}
	}
	// An SGE ending exactly at the region's end is fine.
	_, sges, hint, err := sendOne(t, &verbs.SendRequest{Op: verbs.OpWrite, SGEs: []verbs.SGE{{Key: 11, Offset: 92, Length: 8}}})
	if err != nil || hint != verbs.StatusSuccess || sges[0].Addr != 0x20000+92 {
		t.Errorf("SGE at the end: %+v %v %v", sges[0], hint, err)
	}
}

func TestTranslateRecv(t *testing.T) {
	var w wireRecv
	sges := make([]wireSGE, testLimits.maxSGE)
	s := verbs.SGE{Key: 10, Length: 8}
	if _, err := translateRecv(&verbs.RecvRequest{SGEs: []verbs.SGE{s, s, s}}, testLimits, testRegions, 3, &w, sges, 0); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("too many SGEs: %v, want ErrInvalid", err)
	}
	hint, err := translateRecv(&verbs.RecvRequest{ID: 1, SGEs: []verbs.SGE{{Key: 11, Offset: 50, Length: 51}}}, testLimits, testRegions, 3, &w, sges, 4)
	if err != nil || hint != verbs.StatusLocalLength || sges[0].Addr != 0 {
		t.Errorf("long RECV SGE: hint %v err %v sge %+v", hint, err, sges[0])
	}
	if w != (wireRecv{ID: 3 | recvTag, SGE: 4, NumSGE: 1}) {
		t.Errorf("wire recv %+v", w)
	}
	if _, err := translateRecv(&verbs.RecvRequest{}, testLimits, testRegions, 4, &w, sges, 0); err != nil || w.NumSGE != 0 {
		t.Errorf("empty RECV (for WRITE_WITH_IMM): %+v %v", w, err)
	}
}

func TestLimitsOf(t *testing.T) {
	caps := deviceCaps{maxWR: 1024, maxSGE: 4, maxInline: 512}
	l, err := limitsOf(verbs.QPConfig{}, caps)
	if err != nil || l != (limits{128, 128, 64, 1}) {
		t.Errorf("defaults: %+v %v", l, err)
	}
	for _, cfg := range []verbs.QPConfig{
		{MaxSend: 1025}, {MaxRecv: 1025}, {MaxSGE: 5}, {MaxInline: 513}, {MaxSend: -1}, {MaxInline: -1}, {MaxSGE: -1},
	} {
		if _, err := limitsOf(cfg, caps); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := limitsOf(verbs.QPConfig{MaxSend: 9000}, deviceCaps{maxWR: 1 << 20, maxSGE: 30, maxInline: 4096}); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("over sdpshim's own maximum: %v", err)
	}
}

func TestCompletionOf(t *testing.T) {
	write := ringSlot{id: 5, op: verbs.OpWriteWithImm}
	got := completionOf(&wireCompletion{Status: ibvWCSuccess, Opcode: 1, ByteLen: 77, QPNum: 9}, write, false)
	if got != (verbs.Completion{ID: 5, QP: 9, Op: verbs.OpWriteWithImm}) {
		t.Errorf("WRITE_WITH_IMM completion %+v", got)
	}
	read := ringSlot{id: 6, op: verbs.OpRead}
	got = completionOf(&wireCompletion{Status: ibvWCSuccess, Opcode: 2, ByteLen: 77, QPNum: 9}, read, false)
	if got.ByteLen != 77 || got.Op != verbs.OpRead {
		t.Errorf("READ completion %+v", got)
	}
	// Error completions: opcode and length are undefined; the slot decides.
	got = completionOf(&wireCompletion{Status: ibvWCLocProtErr, Opcode: 0xff, ByteLen: 1, QPNum: 9},
		ringSlot{id: 7, op: verbs.OpWrite, hint: verbs.StatusLocalLength}, false)
	if got != (verbs.Completion{ID: 7, QP: 9, Op: verbs.OpWrite, Status: verbs.StatusLocalLength}) {
		t.Errorf("refined error completion %+v", got)
	}
	got = completionOf(&wireCompletion{Status: ibvWCWRFlushErr, Opcode: 0xff}, ringSlot{id: 8, op: verbs.OpRecv, hint: verbs.StatusLocalLength}, true)
	if got.Status != verbs.StatusFlushed || got.Op != verbs.OpRecv {
		t.Errorf("flushed RECV %+v (a flush is not refined)", got)
	}
	recv := ringSlot{id: 9, op: verbs.OpRecv}
	got = completionOf(&wireCompletion{Status: ibvWCSuccess, Opcode: ibvWCRecvRDMAWithImm, ByteLen: 0, Imm: 0xabc, Flags: ibvWCWithImm}, recv, true)
	if got.Op != verbs.OpRecvWithImm || !got.HasImm || got.Imm != 0xabc {
		t.Errorf("RECV_WITH_IMM %+v", got)
	}
	got = completionOf(&wireCompletion{Status: ibvWCSuccess, Opcode: ibvWCRecv, ByteLen: 100, Imm: 0xabc}, recv, true)
	if got.Op != verbs.OpRecv || got.HasImm || got.Imm != 0 || got.ByteLen != 100 {
		t.Errorf("RECV %+v", got)
	}
}
