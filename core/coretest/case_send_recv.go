package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// SendRecvSizes: side B posts a chain of RECVs, some split over two SGEs;
// side A SENDs messages of edge and random sizes (zero, inline, one byte
// to the full receive buffer), gathered from up to MaxSGE pieces laid out
// out of order, some inline, some with an immediate. B checks each
// completion's order, length, immediate and payload, and that nothing was
// written past the message.

const (
	sendSlot   = 8 << 10
	sendPerRun = 24
)

func sendRounds(s *side) int {
	if s.short {
		return 2
	}
	return 4
}

// message j of round r: its seed.
func sendSeed(r, j int) uint64 { return 0x5e4d<<32 | uint64(r)<<16 | uint64(j) }

func sendSizesA(s *side) {
	c := s.connect(verbs.QPConfig{})
	src := s.region(sendPerRun*sendSlot, 0)
	edges := []int{0, 1, 3, 4, defaultMaxInline - 1, defaultMaxInline, defaultMaxInline + 1, 1000, 4096, sendSlot}
	for r := 0; r < sendRounds(s); r++ {
		sizes := make([]uint64, sendPerRun)
		imms := make([]uint64, sendPerRun) // bit 32: has immediate
		for j := range sizes {
			sizes[j] = uint64(s.rng.IntN(sendSlot + 1))
			if r == 0 && j < len(edges) {
				sizes[j] = uint64(edges[j])
			}
			if s.rng.IntN(3) == 0 {
				imms[j] = 1<<32 | uint64(s.rng.Uint32())
			}
		}
		s.sendWords(append(sizes, imms...)...)
		s.await("posted")

		var head, tail *verbs.SendRequest
		chained := s.rng.IntN(2) == 0
		for j := range sizes {
			n := int(sizes[j])
			slot := src.Bytes()[j*sendSlot : (j+1)*sendSlot]
			wr := &verbs.SendRequest{ID: uint64(r*sendPerRun + j), Op: verbs.OpSend, Flags: verbs.SendSignaled}
			wr.SGEs = gatherSGEs(s, src, j*sendSlot, slot, n, sendSeed(r, j), c.cfg.MaxSGE)
			if imms[j]>>32 != 0 {
				wr.HasImm, wr.Imm = true, uint32(imms[j])
			}
			inline := n > 0 && n <= c.cfg.MaxInline && s.rng.IntN(2) == 0
			if inline {
				wr.Flags |= verbs.SendInline
			}
			if !chained {
				s.postSend(c, wr)
				if inline {
					poison(slot) // copied at post time
				}
				continue
			}
			if head == nil {
				head = wr
			} else {
				tail.Next = wr
			}
			tail = wr
		}
		if chained {
			s.postSend(c, head)
		}
		got := s.completions(c.scq, sendPerRun, "SEND completions")
		for j, g := range got {
			s.check(g, uint64(r*sendPerRun+j), verbs.OpSend, verbs.StatusSuccess)
		}
		s.await("received")
	}
}

// gatherSGEs writes the n-byte message of seed into slot as up to maxSGE
// pieces stored in reverse order, and returns SGEs (into region r at base)
// that gather it in order.
func gatherSGEs(s *side, r verbs.Region, base int, slot []byte, n int, seed uint64, maxSGE int) []verbs.SGE {
	if n == 0 {
		return nil
	}
	msg := make([]byte, n)
	fill(msg, seed)
	pieces := 1 + s.rng.IntN(min(maxSGE, n))
	cuts := []int{0}
	for k := 1; k < pieces; k++ {
		cuts = append(cuts, cuts[k-1]+1+s.rng.IntN(n-cuts[k-1]-(pieces-k)))
	}
	cuts = append(cuts, n)
	sges := make([]verbs.SGE, pieces)
	at := 0
	for k := pieces - 1; k >= 0; k-- {
		piece := msg[cuts[k]:cuts[k+1]]
		copy(slot[at:], piece)
		sges[k] = sge(r, base+at, len(piece))
		at += len(piece)
	}
	return sges
}

func sendSizesB(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.region(sendPerRun*sendSlot, verbs.AccessLocalWrite)
	for r := 0; r < sendRounds(s); r++ {
		v := s.recvWords(2 * sendPerRun)
		sizes, imms := v[:sendPerRun], v[sendPerRun:]
		clear(dst.Bytes())
		var head, tail *verbs.RecvRequest
		splits := make([]int, sendPerRun)
		for j := 0; j < sendPerRun; j++ {
			base := j * sendSlot
			wr := &verbs.RecvRequest{ID: uint64(1000 + r*sendPerRun + j)}
			// Two SGEs that together cover the slot, the second first in
			// memory, or one.
			splits[j] = sendSlot
			if s.rng.IntN(2) == 0 {
				splits[j] = 1 + s.rng.IntN(sendSlot-1)
				wr.SGEs = []verbs.SGE{sge(dst, base+sendSlot-splits[j], splits[j]), sge(dst, base, sendSlot-splits[j])}
			} else {
				wr.SGEs = []verbs.SGE{sge(dst, base, sendSlot)}
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
		got := s.completions(c.rcq, sendPerRun, "RECV completions")
		for j, g := range got {
			s.check(g, uint64(1000+r*sendPerRun+j), verbs.OpRecv, verbs.StatusSuccess)
			n := int(sizes[j])
			if g.ByteLen != uint32(n) {
				s.fatalf("round %d message %d: RECV ByteLen %d, want %d", r, j, g.ByteLen, n)
			}
			hasImm := imms[j]>>32 != 0
			if g.HasImm != hasImm || (hasImm && g.Imm != uint32(imms[j])) {
				s.fatalf("round %d message %d: RECV immediate %v %#x, want %v %#x", r, j, g.HasImm, g.Imm, hasImm, uint32(imms[j]))
			}
			slot := dst.Bytes()[j*sendSlot : (j+1)*sendSlot]
			first, second := slot[sendSlot-splits[j]:], slot[:sendSlot-splits[j]]
			msg := append(append([]byte(nil), first...), second...)
			if k := mismatch(msg[:n], sendSeed(r, j)); k >= 0 {
				s.fatalf("round %d message %d (%d bytes): payload differs at byte %d", r, j, n, k)
			}
			if k := nonzeroAt(msg[n:]); k >= 0 {
				s.fatalf("round %d message %d (%d bytes): RECV buffer written past the message, at byte %d", r, j, n, n+k)
			}
		}
		s.step("received")
	}
}
