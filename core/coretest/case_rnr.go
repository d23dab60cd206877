package coretest

import (
	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// SendWaitsForRecv (receiver not ready): side A posts three SENDs before
// side B has posted any RECV. Each waits in A's queue, neither failing nor
// completing, until B posts one RECV, and then exactly one more completes.
// Then a WRITE posted behind a waiting SEND must stay behind it: its flag
// is not visible at B until B posts the RECV the SEND needs.

var rnrSizes = []int{100, 2000, 8192}

func rnrA(s *side) {
	c := s.connect(verbs.QPConfig{})
	flag := s.recvRegion()
	src := s.region(8192+64, 0)
	fill(src.Bytes()[:8192], 21)
	for i, n := range rnrSizes {
		s.postSend(c, &verbs.SendRequest{ID: uint64(i + 1), Op: verbs.OpSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, n)}})
	}
	s.noCompletion(c.scq, "SENDs posted before the peer posted any RECV")
	s.step("posted")
	for i := range rnrSizes {
		s.await("got")
		s.one(c.scq, uint64(i+1), verbs.OpSend, verbs.StatusSuccess)
		s.noCompletion(c.scq, "the next SEND has no RECV yet")
		if st := c.qp.State(); st != verbs.QPReady {
			s.fatalf("queue pair in state %v while a SEND waits for a RECV", st)
		}
		s.step("next")
	}

	// A WRITE behind a waiting SEND.
	sharedmem.Uint32At(src.Bytes(), 8192).Store(7)
	s.postSend(c, &verbs.SendRequest{ID: 4, Op: verbs.OpSend, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(src, 0, 64)}})
	s.postSend(c, &verbs.SendRequest{ID: 5, Op: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline,
		SGEs: []verbs.SGE{sge(src, 8192, 4)}, RemoteAddr: flag.At(0), RemoteKey: flag.Key})
	s.noCompletion(c.scq, "a WRITE behind a SEND that waits for a RECV")
	s.step("posted behind")
	s.await("got behind")
	got := s.completions(c.scq, 2, "the SEND and the WRITE behind it")
	s.check(got[0], 4, verbs.OpSend, verbs.StatusSuccess)
	s.check(got[1], 5, verbs.OpWrite, verbs.StatusSuccess)
}

func rnrB(s *side) {
	c := s.connect(verbs.QPConfig{})
	flag := s.region(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(flag)
	dst := s.region(8192, verbs.AccessLocalWrite)
	s.await("posted")
	for i, n := range rnrSizes {
		clear(dst.Bytes())
		s.postRecv(c, &verbs.RecvRequest{ID: uint64(10 + i), SGEs: []verbs.SGE{sge(dst, 0, 8192)}})
		g := s.one(c.rcq, uint64(10+i), verbs.OpRecv, verbs.StatusSuccess)
		if g.ByteLen != uint32(n) {
			s.fatalf("RECV %d: ByteLen %d, want %d", i, g.ByteLen, n)
		}
		if k := mismatch(dst.Bytes()[:n], 21); k >= 0 {
			s.fatalf("RECV %d: payload differs at byte %d", i, k)
		}
		s.step("got")
		s.await("next")
	}

	s.await("posted behind")
	if v := sharedmem.Uint32At(flag.Bytes(), 0).Load(); v != 0 {
		s.fatalf("a WRITE posted behind a SEND waiting for a RECV became visible (%#x) before the SEND could execute: RC order broken", v)
	}
	s.noCompletion(c.rcq, "no RECV is posted")
	s.postRecv(c, &verbs.RecvRequest{ID: 20, SGEs: []verbs.SGE{sge(dst, 0, 8192)}})
	s.one(c.rcq, 20, verbs.OpRecv, verbs.StatusSuccess)
	s.waitWord(flag.Bytes(), 0, 7, "the WRITE behind the SEND")
	s.step("got behind")
}
