package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// PostListChains: a valid chain of WRITEs, only the last signaled, posts
// and executes whole. A chain whose middle request is invalid at post time
// (bad opcode, RECV opcode on the send queue, too many SGEs, inline over
// MaxInline) returns that request as bad; the ones before it execute and
// the ones after it do not, and the queue pair stays ready. The same for a
// RECV chain with a middle request of too many SGEs.

const (
	chainSlots = 8
	chainSlot  = 256
	chainSGE   = 2
	chainInl   = 32
)

var chainConfig = verbs.QPConfig{MaxSGE: chainSGE, MaxInline: chainInl}

// chainSeed is the pattern of slot j in round r.
func chainSeed(r, j int) uint64 { return uint64(r)<<8 | uint64(j) }

var chainFaults = []struct {
	name  string
	spoil func(wr *verbs.SendRequest, src verbs.Region)
}{
	{"bad opcode", func(wr *verbs.SendRequest, _ verbs.Region) { wr.Op = 0 }},
	{"RECV opcode on the send queue", func(wr *verbs.SendRequest, _ verbs.Region) { wr.Op = verbs.OpRecv }},
	{"too many SGEs", func(wr *verbs.SendRequest, src verbs.Region) {
		wr.SGEs = []verbs.SGE{sge(src, 0, 8), sge(src, 8, 8), sge(src, 16, 8)}
	}},
	{"inline over MaxInline", func(wr *verbs.SendRequest, src verbs.Region) {
		wr.Flags |= verbs.SendInline
		wr.SGEs = []verbs.SGE{sge(src, 0, chainInl+1)}
	}},
}

func chainA(s *side) {
	c := s.connect(chainConfig)
	dst := s.recvRegion()
	src := s.region(chainSlots*chainSlot, 0)
	write := func(id uint64, r, j int, signaled bool) *verbs.SendRequest {
		fill(src.Bytes()[j*chainSlot:(j+1)*chainSlot], chainSeed(r, j))
		wr := &verbs.SendRequest{ID: id, Op: verbs.OpWrite, SGEs: []verbs.SGE{sge(src, j*chainSlot, chainSlot)},
			RemoteAddr: dst.At(uint64(j * chainSlot)), RemoteKey: dst.Key}
		if signaled {
			wr.Flags = verbs.SendSignaled
		}
		return wr
	}

	// Round 0: a valid chain of 8, the last one signaled.
	var head *verbs.SendRequest
	for j := chainSlots - 1; j >= 0; j-- {
		wr := write(uint64(j), 0, j, j == chainSlots-1)
		wr.Next, head = head, wr
	}
	s.postSend(c, head)
	s.one(c.scq, chainSlots-1, verbs.OpWrite, verbs.StatusSuccess)
	s.noCompletion(c.scq, "unsignaled WRITEs of a chain")
	s.sendWords(0, 0xff)
	s.await("checked")

	// Rounds 1..: a chain w0 w1 BAD w3 w4, then a sentinel.
	for f, fault := range chainFaults {
		r := f + 1
		id := uint64(r * 100)
		ws := []*verbs.SendRequest{write(id, r, 0, true), write(id+1, r, 1, true), write(id+2, r, 2, true),
			write(id+3, r, 3, true), write(id+4, r, 4, true)}
		for k := 0; k < len(ws)-1; k++ {
			ws[k].Next = ws[k+1]
		}
		fault.spoil(ws[2], src)
		bad, err := c.qp.PostSend(ws[0])
		if err == nil || bad != ws[2] {
			badID := int64(-1)
			if bad != nil {
				badID = int64(bad.ID)
			}
			s.fatalf("%s: PostSend of a chain whose 3rd request is invalid returned (bad request %d, %v), want (request %d, an error)", fault.name, badID, err, ws[2].ID)
		}
		got := s.completions(c.scq, 2, fault.name+": the requests before the invalid one")
		s.check(got[0], id, verbs.OpWrite, verbs.StatusSuccess)
		s.check(got[1], id+1, verbs.OpWrite, verbs.StatusSuccess)
		if st := c.qp.State(); st != verbs.QPReady {
			s.fatalf("%s: queue pair in state %v after a post-time error, want ready", fault.name, st)
		}
		s.postSend(c, write(id+5, r, 5, true))
		if g := s.completions(c.scq, 1, fault.name+": the sentinel WRITE")[0]; g.ID != id+5 {
			s.fatalf("%s: got completion %s after the refused request; want only the sentinel %d (requests after the invalid one must not be posted)", fault.name, fmtCompletion(g), id+5)
		}
		s.sendWords(uint64(r), 1<<0|1<<1|1<<5)
		s.await("checked")
	}
	s.sendWords(0, 0)

	// A RECV chain r0 r1 BAD r3: the peer's two SENDs land in r0, r1; its
	// third must wait for r4, which proves r3 was not posted.
	rbuf := s.region(5*chainSlot, verbs.AccessLocalWrite)
	rs := []*verbs.RecvRequest{{ID: 500, SGEs: []verbs.SGE{sge(rbuf, 0, chainSlot)}},
		{ID: 501, SGEs: []verbs.SGE{sge(rbuf, chainSlot, chainSlot)}},
		{ID: 502, SGEs: []verbs.SGE{sge(rbuf, 0, 8), sge(rbuf, 8, 8), sge(rbuf, 16, 8)}},
		{ID: 503, SGEs: []verbs.SGE{sge(rbuf, 3*chainSlot, chainSlot)}}}
	for k := 0; k < len(rs)-1; k++ {
		rs[k].Next = rs[k+1]
	}
	if bad, err := c.qp.PostRecv(rs[0]); err == nil || bad != rs[2] {
		s.fatalf("PostRecv of a chain whose 3rd request has too many SGEs returned (%p, %v), want (%p, an error)", bad, err, rs[2])
	}
	s.step("recv chain posted")
	got := s.completions(c.rcq, 2, "RECVs before the invalid one")
	s.check(got[0], 500, verbs.OpRecv, verbs.StatusSuccess)
	s.check(got[1], 501, verbs.OpRecv, verbs.StatusSuccess)
	s.step("third")
	s.await("third sent")
	s.postRecv(c, &verbs.RecvRequest{ID: 504, SGEs: []verbs.SGE{sge(rbuf, 4*chainSlot, chainSlot)}})
	if g := s.completions(c.rcq, 1, "the third SEND")[0]; g.ID != 504 {
		s.fatalf("the third SEND completed %s, want RECV 504: a RECV after the refused one was posted", fmtCompletion(g))
	}
	for k, off := range []int{0, chainSlot, 4 * chainSlot} {
		if i := mismatch(rbuf.Bytes()[off:off+chainSlot], uint64(900+k)); i >= 0 {
			s.fatalf("SEND %d payload differs at byte %d", k, i)
		}
	}
}

func chainB(s *side) {
	c := s.connect(chainConfig)
	dst := s.region(chainSlots*chainSlot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	for {
		v := s.recvWords(2)
		if v[1] == 0 {
			break
		}
		r := int(v[0])
		for j := 0; j < chainSlots; j++ {
			slot := dst.Bytes()[j*chainSlot : (j+1)*chainSlot]
			if v[1]&(1<<j) != 0 {
				if k := mismatch(slot, chainSeed(r, j)); k >= 0 {
					s.fatalf("round %d: slot %d should hold the WRITE posted before the invalid request; differs at byte %d", r, j, k)
				}
			} else if k := nonzeroAt(slot); k >= 0 {
				s.fatalf("round %d: slot %d was written, but its WRITE came after the invalid request in the chain (byte %d)", r, j, k)
			}
		}
		clear(dst.Bytes())
		s.step("checked")
	}

	src := s.region(3*chainSlot, 0)
	for k := 0; k < 3; k++ {
		fill(src.Bytes()[k*chainSlot:(k+1)*chainSlot], uint64(900+k))
	}
	send := func(k int) {
		s.postSend(c, &verbs.SendRequest{ID: uint64(k), Op: verbs.OpSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, k*chainSlot, chainSlot)}})
	}
	s.await("recv chain posted")
	send(0)
	send(1)
	s.one(c.scq, 0, verbs.OpSend, verbs.StatusSuccess)
	s.one(c.scq, 1, verbs.OpSend, verbs.StatusSuccess)
	s.await("third")
	send(2)
	s.step("third sent")
	s.one(c.scq, 2, verbs.OpSend, verbs.StatusSuccess)
}
