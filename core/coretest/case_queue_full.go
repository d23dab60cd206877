package coretest

import (
	"errors"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// QueueFull: with MaxSend 4 and no RECV at the peer, four SENDs stay
// outstanding, so a chain of six returns its fifth with ErrQueueFull; a
// RECV chain of five on MaxRecv 4 likewise. Once the peer posts RECVs and
// the completions are polled, the send queue takes four more.

const queueDepth = 4

var queueConfig = verbs.QPConfig{MaxSend: queueDepth, MaxRecv: queueDepth}

func queueFullA(s *side) {
	c := s.connect(queueConfig)
	src := s.region(4096, verbs.AccessLocalWrite)
	fill(src.Bytes(), 41)
	sends := make([]*verbs.SendRequest, queueDepth+2)
	for i := range sends {
		sends[i] = &verbs.SendRequest{ID: uint64(i), Op: verbs.OpSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, 128)}}
		if i > 0 {
			sends[i-1].Next = sends[i]
		}
	}
	bad, err := c.qp.PostSend(sends[0])
	if bad != sends[queueDepth] || !errors.Is(err, verbs.ErrQueueFull) {
		s.fatalf("PostSend of %d SENDs on MaxSend %d with none completable returned (%p, %v), want (request %d %p, ErrQueueFull)",
			len(sends), queueDepth, bad, err, queueDepth, sends[queueDepth])
	}
	recvs := make([]*verbs.RecvRequest, queueDepth+1)
	for i := range recvs {
		recvs[i] = &verbs.RecvRequest{ID: uint64(100 + i), SGEs: []verbs.SGE{sge(src, 0, 4096)}}
		if i > 0 {
			recvs[i-1].Next = recvs[i]
		}
	}
	if bad, err := c.qp.PostRecv(recvs[0]); bad != recvs[queueDepth] || !errors.Is(err, verbs.ErrQueueFull) {
		s.fatalf("PostRecv of %d RECVs on MaxRecv %d returned (%p, %v), want (request %d %p, ErrQueueFull)",
			len(recvs), queueDepth, bad, err, queueDepth, recvs[queueDepth])
	}
	s.step("posted")
	got := s.completions(c.scq, queueDepth, "the SENDs that fit the queue")
	for i, g := range got {
		s.check(g, uint64(i), verbs.OpSend, verbs.StatusSuccess)
	}
	// The queue has room again.
	for i := 0; i < queueDepth; i++ {
		s.postSend(c, &verbs.SendRequest{ID: uint64(10 + i), Op: verbs.OpSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, 128)}})
	}
	s.step("posted again")
	got = s.completions(c.scq, queueDepth, "SENDs posted after the queue drained")
	for i, g := range got {
		s.check(g, uint64(10+i), verbs.OpSend, verbs.StatusSuccess)
	}
}

func queueFullB(s *side) {
	c := s.connect(queueConfig)
	dst := s.region(queueDepth*256, verbs.AccessLocalWrite)
	for round := 0; round < 2; round++ {
		if round == 0 {
			s.await("posted")
		} else {
			s.await("posted again")
		}
		for i := 0; i < queueDepth; i++ {
			s.postRecv(c, &verbs.RecvRequest{ID: uint64(round*10 + i), SGEs: []verbs.SGE{sge(dst, i*256, 256)}})
		}
		got := s.completions(c.rcq, queueDepth, "RECVs of the SENDs that fit")
		for i, g := range got {
			s.check(g, uint64(round*10+i), verbs.OpRecv, verbs.StatusSuccess)
			if g.ByteLen != 128 {
				s.fatalf("RECV %d: ByteLen %d, want 128", i, g.ByteLen)
			}
		}
	}
}
