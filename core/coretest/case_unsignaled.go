package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// UnsignaledCompletions: unsignaled WRITEs and SENDs that succeed produce
// no completion (a later signaled request's completion is the only one),
// RECVs always complete, and an unsignaled WRITE that fails (bad remote
// key) does produce its error completion, followed by StatusFlushed for
// the request behind it, and the queue pair enters QPError.

const unsigSlot = 64

func unsignaledA(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.recvRegion()
	src := s.region(64*unsigSlot, 0)
	write := func(id uint64, j int, flags verbs.SendFlags) *verbs.SendRequest {
		fill(src.Bytes()[j*unsigSlot:(j+1)*unsigSlot], uint64(700+j))
		return &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: flags,
			SGEs: []verbs.SGE{sge(src, j*unsigSlot, unsigSlot)}, RemoteAddr: dst.At(uint64(j * unsigSlot)), RemoteKey: dst.Key}
	}
	// Ten unsignaled WRITEs posted one by one, then a signaled one.
	for j := 0; j < 10; j++ {
		s.postSend(c, write(uint64(j), j, 0))
	}
	s.postSend(c, write(100, 10, verbs.SendSignaled))
	s.one(c.scq, 100, verbs.OpWrite, verbs.StatusSuccess)
	s.noCompletion(c.scq, "successful unsignaled WRITEs")
	// A chain of five unsignaled and one signaled.
	var head *verbs.SendRequest
	for j := 16; j >= 11; j-- {
		flags := verbs.SendFlags(0)
		if j == 16 {
			flags = verbs.SendSignaled
		}
		wr := write(uint64(200+j), j, flags)
		wr.Next, head = head, wr
	}
	s.postSend(c, head)
	s.one(c.scq, 216, verbs.OpWrite, verbs.StatusSuccess)
	s.noCompletion(c.scq, "successful unsignaled WRITEs in a chain")
	// An unsignaled SEND, then a signaled one.
	s.await("recvs posted")
	s.postSend(c, &verbs.SendRequest{ID: 300, Op: verbs.OpSend, SGEs: []verbs.SGE{sge(src, 0, 32)}})
	s.postSend(c, &verbs.SendRequest{ID: 301, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(src, 0, 32)}})
	s.one(c.scq, 301, verbs.OpSend, verbs.StatusSuccess)
	s.noCompletion(c.scq, "a successful unsignaled SEND")
	s.step("check")
	s.await("checked")

	// On a fresh pair: an unsignaled WRITE that fails.
	c2 := s.connect(verbs.QPConfig{})
	badWR := write(400, 20, 0)
	badWR.RemoteKey = dst.Key ^ 0xa5a5a5a5
	s.postSend(c2, badWR)
	s.postSend(c2, write(401, 21, verbs.SendSignaled))
	got := s.completions(c2.scq, 2, "the failed unsignaled WRITE and the one behind it")
	s.check(got[0], 400, verbs.OpWrite, verbs.StatusRemoteAccess)
	s.check(got[1], 401, verbs.OpWrite, verbs.StatusFlushed)
	s.waitState(c2.qp, verbs.QPError, "after an error completion")
}

func unsignaledB(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.region(64*unsigSlot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	rbuf := s.region(2*unsigSlot, verbs.AccessLocalWrite)
	s.postRecv(c, &verbs.RecvRequest{ID: 1, SGEs: []verbs.SGE{sge(rbuf, 0, unsigSlot)},
		Next: &verbs.RecvRequest{ID: 2, SGEs: []verbs.SGE{sge(rbuf, unsigSlot, unsigSlot)}}})
	s.step("recvs posted")
	got := s.completions(c.rcq, 2, "RECVs of an unsignaled and a signaled SEND")
	s.check(got[0], 1, verbs.OpRecv, verbs.StatusSuccess)
	s.check(got[1], 2, verbs.OpRecv, verbs.StatusSuccess)
	s.await("check")
	for j := 0; j <= 16; j++ {
		if k := mismatch(dst.Bytes()[j*unsigSlot:(j+1)*unsigSlot], uint64(700+j)); k >= 0 {
			s.fatalf("slot %d: WRITE payload differs at byte %d", j, k)
		}
	}
	s.step("checked")
	s.connect(verbs.QPConfig{})
}
