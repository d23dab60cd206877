package coretest

import (
	"encoding/binary"

	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// PostBeforePeerConnect: side A connects and posts a WRITE, an inline
// flag WRITE and a SEND while side B has not called Connect yet (B has
// posted its RECV in QPInit). Nothing may land before B's Connect; after
// it, everything does, in order.

const earlyPayload = 256

func earlyPostA(s *side) {
	c := s.newConn(verbs.QPConfig{})
	remote := s.swapEndpoints(c)
	dst := s.recvRegion()
	s.connectTo(c, remote)
	src := s.region(earlyPayload+16, 0)
	fill(src.Bytes()[:earlyPayload], 11)
	binary.LittleEndian.PutUint32(src.Bytes()[earlyPayload:], 1)
	wr := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(src, 0, earlyPayload)}, RemoteAddr: dst.At(0), RemoteKey: dst.Key,
		Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline,
			SGEs: []verbs.SGE{sge(src, earlyPayload, 4)}, RemoteAddr: dst.At(earlyPayload), RemoteKey: dst.Key,
			Next: &verbs.SendRequest{ID: 3, Op: verbs.OpSend, Flags: verbs.SendSignaled,
				SGEs: []verbs.SGE{sge(src, 0, 100)}}}}
	s.postSend(c, wr)
	s.step("posted")
	got := s.completions(c.scq, 3, "completions of requests posted before the peer connected")
	s.check(got[0], 1, verbs.OpWrite, verbs.StatusSuccess)
	s.check(got[1], 2, verbs.OpWrite, verbs.StatusSuccess)
	s.check(got[2], 3, verbs.OpSend, verbs.StatusSuccess)
}

func earlyPostB(s *side) {
	c := s.newConn(verbs.QPConfig{})
	remote := s.swapEndpoints(c)
	dst := s.region(earlyPayload+16, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	rbuf := s.region(4096, verbs.AccessLocalWrite)
	s.postRecv(c, &verbs.RecvRequest{ID: 7, SGEs: []verbs.SGE{sge(rbuf, 0, 4096)}})
	s.await("posted")
	// Not connected yet: nothing of the peer's may have landed.
	if v := sharedmem.Uint32At(dst.Bytes(), earlyPayload).Load(); v != 0 {
		s.fatalf("flag WRITE landed (%#x) before this side called Connect", v)
	}
	if i := nonzeroAt(dst.Bytes()[:earlyPayload]); i >= 0 {
		s.fatalf("WRITE landed (byte %d) before this side called Connect", i)
	}
	s.noCompletion(c.rcq, "the SEND cannot land before this side called Connect")
	s.connectTo(c, remote)
	s.waitWord(dst.Bytes(), earlyPayload, 1, "the flag WRITE posted before Connect")
	if i := mismatch(dst.Bytes()[:earlyPayload], 11); i >= 0 {
		s.fatalf("payload WRITE posted before Connect differs at byte %d though its flag landed", i)
	}
	rc := s.one(c.rcq, 7, verbs.OpRecv, verbs.StatusSuccess)
	if rc.ByteLen != 100 {
		s.fatalf("RECV got %d bytes, want 100", rc.ByteLen)
	}
	if i := mismatch(rbuf.Bytes()[:100], 11); i >= 0 {
		s.fatalf("SEND payload differs at byte %d", i)
	}
}
