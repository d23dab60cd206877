package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// When the peer goes away (its process is SIGKILLed, or it closes its
// queue pair) while side A has a SEND waiting for a RECV and RECVs posted,
// A's queue pair moves to QPError on its own, every outstanding request
// completes exactly once with an error status (RECVs with StatusFlushed),
// and a request posted afterwards is refused or flushed, never hangs.
// CloseFlushesOutstanding is the mirror: A closes its own queue pair with
// the same work outstanding; A's requests are flushed and B's queue pair
// moves to QPError.

const goneRecvs = 4

// outstanding posts goneRecvs RECVs (IDs 100...) and one SEND (ID 1) that
// waits because the peer posts no RECV.
func (s *side) outstanding(c *conn) {
	rbuf := s.region(goneRecvs*256, verbs.AccessLocalWrite)
	for i := 0; i < goneRecvs; i++ {
		s.postRecv(c, &verbs.RecvRequest{ID: uint64(100 + i), SGEs: []verbs.SGE{sge(rbuf, i*256, 256)}})
	}
	src := s.region(256, 0)
	s.postSend(c, &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(src, 0, 256)}})
	s.noCompletion(c.scq, "a SEND the peer has no RECV for")
}

// flushed checks that the outstanding work completed with errors, once;
// with own, the queue pair was closed locally and the SEND must be flushed.
func (s *side) flushed(c *conn, why string, own bool) {
	g := s.completions(c.scq, 1, "the waiting SEND after "+why)[0]
	if g.ID != 1 || g.Status == verbs.StatusSuccess || (own && g.Status != verbs.StatusFlushed) {
		s.fatalf("the waiting SEND completed %s after %s; want request 1 with an error status", fmtCompletion(g), why)
	}
	got := s.completions(c.rcq, goneRecvs, "the posted RECVs after "+why)
	for i, g := range got {
		s.check(g, uint64(100+i), verbs.OpRecv, verbs.StatusFlushed)
	}
	s.noCompletion(c.scq, "every send request completes once")
	s.noCompletion(c.rcq, "every RECV completes once")
}

// postAfterError posts one more SEND on a queue pair in QPError: it must
// be refused at post time or complete with StatusFlushed.
func (s *side) postAfterError(c *conn) {
	src := s.region(64, 0)
	wr := &verbs.SendRequest{ID: 2, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(src, 0, 64)}}
	bad, err := c.qp.PostSend(wr)
	if err != nil {
		if bad != wr {
			s.fatalf("PostSend on a queue pair in QPError returned bad %p with %v, want the request %p", bad, err, wr)
		}
		s.logf("PostSend on a queue pair in QPError was refused: %v", err)
		return
	}
	s.one(c.scq, 2, verbs.OpSend, verbs.StatusFlushed)
}

func peerKilledA(s *side) {
	c := s.connect(verbs.QPConfig{})
	s.await("ready")
	s.outstanding(c)
	s.killPeer()
	s.waitState(c.qp, verbs.QPError, "the peer process was killed")
	s.flushed(c, "the peer process was killed", false)
	s.postAfterError(c)
}

func peerKilledB(s *side) {
	s.connect(verbs.QPConfig{})
	s.step("ready")
	s.await("the end") // never comes: side A kills this process
}

func peerClosedA(s *side) {
	c := s.connect(verbs.QPConfig{})
	s.outstanding(c)
	s.step("posted")
	s.await("closed")
	s.waitState(c.qp, verbs.QPError, "the peer closed its queue pair")
	s.flushed(c, "the peer closed its queue pair", false)
	s.postAfterError(c)
}

func peerClosedB(s *side) {
	c := s.connect(verbs.QPConfig{})
	s.await("posted")
	s.closeNow(c.closer)
	s.step("closed")
}

func closeFlushA(s *side) {
	c := s.connect(verbs.QPConfig{})
	s.outstanding(c)
	s.closeNow(c.closer)
	s.flushed(c, "closing the queue pair", true)
	s.step("closed")
}

func closeFlushB(s *side) {
	c := s.connect(verbs.QPConfig{})
	s.await("closed")
	s.waitState(c.qp, verbs.QPError, "the peer closed its queue pair")
}
