package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// WriteWithImmConsumesRecv: side B posts RECVs (most without SGEs, one
// with a buffer that must stay untouched); side A WRITE_WITH_IMMs payloads
// (the first of zero bytes) with edge and random immediates. Each consumes
// one RECV, in order, whose completion is RECV_WITH_IMM with the
// immediate, and the payload is visible when it is polled. A last one,
// posted while no RECV is, waits for the RECV posted after it.

const (
	immCount = 10
	immSlot  = 4096
)

func immA(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.recvRegion()
	src := s.region(immCount*immSlot, 0)
	sizes := make([]uint64, immCount)
	imms := make([]uint64, immCount)
	for j := range sizes {
		sizes[j] = uint64(1 + s.rng.IntN(immSlot))
		imms[j] = uint64(s.rng.Uint32())
	}
	sizes[0] = 0
	imms[0], imms[1], imms[2] = 0, 0xffffffff, 0x80000000
	s.sendWords(append(sizes, imms...)...)
	s.await("posted")
	for j := range sizes {
		n := int(sizes[j])
		fill(src.Bytes()[j*immSlot:j*immSlot+n], uint64(300+j))
		wr := &verbs.SendRequest{ID: uint64(j), Op: verbs.OpWriteWithImm, Flags: verbs.SendSignaled,
			RemoteAddr: dst.At(uint64(j * immSlot)), RemoteKey: dst.Key, Imm: uint32(imms[j])}
		if n > 0 {
			wr.SGEs = []verbs.SGE{sge(src, j*immSlot, n)}
		}
		s.postSend(c, wr)
	}
	got := s.completions(c.scq, immCount, "WRITE_WITH_IMM completions")
	for j, g := range got {
		s.check(g, uint64(j), verbs.OpWriteWithImm, verbs.StatusSuccess)
		if g.QP != c.qp.Number() {
			s.fatalf("completion %s names queue pair %d, want %d", fmtCompletion(g), g.QP, c.qp.Number())
		}
	}

	// One more with no RECV posted: it waits for one, like a SEND.
	s.await("drained")
	s.postSend(c, &verbs.SendRequest{ID: immCount, Op: verbs.OpWriteWithImm, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(src, 0, 16)}, RemoteAddr: dst.At(0), RemoteKey: dst.Key, Imm: 0x1234})
	s.noCompletion(c.scq, "a WRITE_WITH_IMM the peer has no RECV for")
	s.step("extra posted")
	s.await("extra received")
	s.one(c.scq, immCount, verbs.OpWriteWithImm, verbs.StatusSuccess)
}

func immB(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.region(immCount*immSlot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	spare := s.region(immSlot, verbs.AccessLocalWrite)
	v := s.recvWords(2 * immCount)
	sizes, imms := v[:immCount], v[immCount:]
	var head, tail *verbs.RecvRequest
	for j := 0; j < immCount; j++ {
		wr := &verbs.RecvRequest{ID: uint64(100 + j)}
		if j == 3 {
			wr.SGEs = []verbs.SGE{sge(spare, 0, immSlot)}
		}
		if head == nil {
			head = wr
		} else {
			tail.Next = wr
		}
		tail = wr
	}
	s.postRecv(c, head)
	s.step("posted")
	for j := 0; j < immCount; j++ {
		g := s.completions(c.rcq, 1, "RECV_WITH_IMM completion")[0]
		s.check(g, uint64(100+j), verbs.OpRecvWithImm, verbs.StatusSuccess)
		if g.QP != c.qp.Number() {
			s.fatalf("completion %s names queue pair %d, want %d", fmtCompletion(g), g.QP, c.qp.Number())
		}
		if !g.HasImm || g.Imm != uint32(imms[j]) {
			s.fatalf("RECV %d: immediate %v %#x, want true %#x", j, g.HasImm, g.Imm, uint32(imms[j]))
		}
		n := int(sizes[j])
		if k := mismatch(dst.Bytes()[j*immSlot:j*immSlot+n], uint64(300+j)); k >= 0 {
			s.fatalf("WRITE_WITH_IMM %d: payload of %d bytes differs at byte %d when its RECV completion is polled", j, n, k)
		}
	}
	if k := nonzeroAt(spare.Bytes()); k >= 0 {
		s.fatalf("WRITE_WITH_IMM wrote into the SGEs of the RECV it consumed (byte %d)", k)
	}

	s.step("drained")
	s.await("extra posted")
	s.noCompletion(c.rcq, "no RECV is posted")
	s.postRecv(c, &verbs.RecvRequest{ID: 200})
	g := s.one(c.rcq, 200, verbs.OpRecvWithImm, verbs.StatusSuccess)
	if !g.HasImm || g.Imm != 0x1234 {
		s.fatalf("late RECV: immediate %v %#x, want true 0x1234", g.HasImm, g.Imm)
	}
	s.step("extra received")
}
