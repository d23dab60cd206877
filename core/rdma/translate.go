package rdma

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// This file turns core work requests into the C layout the cgo layer
// posts (and completions back), in pure Go: the structs below have the
// exact layout of their C counterparts in verbs.go, which checks that at
// compile time. In production they live in C memory preallocated per
// queue pair; tests use Go memory.

// wireSGE is struct ibv_sge.
type wireSGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// wireSend is struct sdp_swr: one send request, flattened (no unions, no
// pointers); the C side builds the struct ibv_send_wr from it.
type wireSend struct {
	ID         uint64 // wr_id: the ring sequence number
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32 // host order; C converts to network order
	SGE        uint32 // index of the first SGE in the queue pair's SGE array
	NumSGE     uint16
	Opcode     uint8 // enum ibv_wr_opcode
	Flags      uint8 // enum ibv_send_flags
}

// wireRecv is struct sdp_rwr.
type wireRecv struct {
	ID     uint64 // wr_id: the ring sequence number | recvTag
	SGE    uint32
	NumSGE uint32
}

// wireCompletion is struct sdp_wc: the fields of struct ibv_wc sdpshim
// uses, with the immediate already in host order.
type wireCompletion struct {
	ID      uint64
	Status  uint32 // enum ibv_wc_status
	Opcode  uint32 // enum ibv_wc_opcode; undefined unless Status is success
	ByteLen uint32
	Imm     uint32
	QPNum   uint32
	Flags   uint32 // enum ibv_wc_flags
}

// regionInfo is what translation needs of a registered region.
type regionInfo struct {
	base uint64 // virtual address of byte 0
	size uint64 // registered length
}

// regionSet maps local keys to regions. It is immutable once published
// (see regionTable), so lookups take no lock.
type regionSet map[uint32]regionInfo

// limits are a queue pair's normalised QPConfig limits.
type limits struct {
	maxSend, maxRecv, maxInline, maxSGE int
}

// deviceCaps bound limits: the device's (ibv_query_device) capped by
// sdpshim's own maxima.
type deviceCaps struct {
	maxWR, maxSGE, maxInline int
}

const (
	maxWorkQueue   = 8192
	maxInlineLimit = 1024
	maxSGELimit    = 16
)

// limitsOf applies the QPConfig defaults (128 sends, 128 receives, 64
// inline bytes, 1 SGE: those of the shm provider) and checks the bounds.
func limitsOf(cfg verbs.QPConfig, caps deviceCaps) (limits, error) {
	l := limits{cfg.MaxSend, cfg.MaxRecv, cfg.MaxInline, cfg.MaxSGE}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.maxSend, 128)
	def(&l.maxRecv, 128)
	def(&l.maxInline, 64)
	def(&l.maxSGE, 1)
	wr := min(caps.maxWR, maxWorkQueue)
	sge := min(caps.maxSGE, maxSGELimit)
	inl := min(caps.maxInline, maxInlineLimit)
	if l.maxSend < 1 || l.maxSend > wr || l.maxRecv < 1 || l.maxRecv > wr ||
		l.maxInline < 0 || l.maxInline > inl || l.maxSGE < 1 || l.maxSGE > sge {
		return l, fmt.Errorf("rdma: QP limits send %d recv %d inline %d sge %d not within 1..%d/1..%d/0..%d/1..%d: %w",
			cfg.MaxSend, cfg.MaxRecv, cfg.MaxInline, cfg.MaxSGE, wr, wr, inl, sge, verbs.ErrInvalid)
	}
	return l, nil
}

// translateSend checks wr as PostSend must before it reaches verbs (bad
// opcode, too many SGEs, inline READ or inline payload over maxInline:
// ErrInvalid) and writes it to w, its SGEs to sges (len >= lim.maxSGE)
// starting at index sgeIndex. It returns the status hint for the ring.
//
// SGEs are mapped through regions. One that names no region, or reaches
// outside its region, is given address 0 so the device refuses it with an
// error completion, as the contract requires; the hint records which
// status that completion must report. Such a request is never posted
// inline: the library would copy from the bogus address at post time.
func translateSend(wr *verbs.SendRequest, lim limits, regions regionSet, seq uint64, w *wireSend, sges []wireSGE, sgeIndex uint32) (verbs.Status, error) {
	opcode, ok := wrOpcodeOf(wr.Op, wr.HasImm)
	if !ok {
		return 0, fmt.Errorf("rdma: post send: opcode %v: %w", wr.Op, verbs.ErrInvalid)
	}
	if len(wr.SGEs) > lim.maxSGE {
		return 0, fmt.Errorf("rdma: post send: %d SGEs over %d: %w", len(wr.SGEs), lim.maxSGE, verbs.ErrInvalid)
	}
	inline := wr.Flags&verbs.SendInline != 0
	if inline {
		if wr.Op == verbs.OpRead {
			return 0, fmt.Errorf("rdma: post send: inline READ: %w", verbs.ErrInvalid)
		}
		var total uint64
		for _, s := range wr.SGEs {
			total += uint64(s.Length)
		}
		if total > uint64(lim.maxInline) {
			return 0, fmt.Errorf("rdma: post send: inline payload %d over %d: %w", total, lim.maxInline, verbs.ErrInvalid)
		}
	}
	hint := mapSGEs(wr.SGEs, regions, sges)
	flags := sendFlagsOf(wr.Flags)
	if hint != verbs.StatusSuccess {
		flags &^= ibvSendInline
	}
	imm := uint32(0)
	if wr.Op == verbs.OpWriteWithImm || (wr.Op == verbs.OpSend && wr.HasImm) {
		imm = wr.Imm
	}
	*w = wireSend{
		ID:         seq,
		RemoteAddr: wr.RemoteAddr,
		RKey:       wr.RemoteKey,
		Imm:        imm,
		SGE:        sgeIndex,
		NumSGE:     uint16(len(wr.SGEs)),
		Opcode:     opcode,
		Flags:      flags,
	}
	if wr.Op == verbs.OpSend {
		w.RemoteAddr, w.RKey = 0, 0
	}
	return hint, nil
}

// translateRecv is translateSend for a receive request: only too many
// SGEs is a post-time error.
func translateRecv(wr *verbs.RecvRequest, lim limits, regions regionSet, seq uint64, w *wireRecv, sges []wireSGE, sgeIndex uint32) (verbs.Status, error) {
	if len(wr.SGEs) > lim.maxSGE {
		return 0, fmt.Errorf("rdma: post recv: %d SGEs over %d: %w", len(wr.SGEs), lim.maxSGE, verbs.ErrInvalid)
	}
	hint := mapSGEs(wr.SGEs, regions, sges)
	*w = wireRecv{ID: seq | recvTag, SGE: sgeIndex, NumSGE: uint32(len(wr.SGEs))}
	return hint, nil
}

// mapSGEs writes the verbs form of in to out and returns
// StatusLocalProtection if an SGE names no region, else
// StatusLocalLength if one reaches outside its region, else success.
func mapSGEs(in []verbs.SGE, regions regionSet, out []wireSGE) verbs.Status {
	hint := verbs.StatusSuccess
	for i, s := range in {
		out[i] = wireSGE{Length: s.Length, LKey: s.Key}
		r, ok := regions[s.Key]
		switch {
		case !ok:
			hint = verbs.StatusLocalProtection
		case s.Offset > r.size || uint64(s.Length) > r.size-s.Offset:
			if hint == verbs.StatusSuccess {
				hint = verbs.StatusLocalLength
			}
		default:
			out[i].Addr = r.base + s.Offset
		}
	}
	return hint
}

// completionOf turns a device completion and the slot of its request into
// a verbs.Completion. Verbs defines only wr_id, status and qp_num of an
// error completion; the rest comes from the slot.
func completionOf(w *wireCompletion, s ringSlot, recv bool) verbs.Completion {
	c := verbs.Completion{ID: s.id, QP: w.QPNum, Op: s.op, Status: statusOf(w.Status)}
	if c.Status != verbs.StatusSuccess {
		c.Status = refineStatus(c.Status, s.hint)
		return c
	}
	if recv {
		if op, ok := recvOpOf(w.Opcode); ok {
			c.Op = op
		}
		c.ByteLen = w.ByteLen
		if w.Flags&ibvWCWithImm != 0 {
			c.Imm, c.HasImm = w.Imm, true
		}
		return c
	}
	if s.op == verbs.OpRead {
		c.ByteLen = w.ByteLen
	}
	return c
}
