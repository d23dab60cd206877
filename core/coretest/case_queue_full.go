package coretest

import (
	"errors"

	"github.com/sdpshim/sdpshim/core"
)

// QueueFull: with MaxSend 4 and no RECV at the peer, four SENDs stay
// outstanding, so a chain of six returns its fifth with ErrQueueFull; a
// RECV chain of five on MaxRecv 4 likewise. Once the peer posts RECVs and
// the completions are polled, the send queue takes four more.

const queueDepth = 4

var queueConfig = core.QPConfig{MaxSend: queueDepth, MaxRecv: queueDepth}

func queueFullA(s *side) {
	c := s.connect(queueConfig)
	src := s.region(4096, core.AccessLocalWrite)
	fill(src.Bytes(), 41)
	sends := make([]*core.SendRequest, queueDepth+2)
	for i := range sends {
		sends[i] = &core.SendRequest{ID: uint64(i), Op: core.OpSend, Flags: core.SendSignaled,
			SGEs: []core.SGE{sge(src, 0, 128)}}
		if i > 0 {
			sends[i-1].Next = sends[i]
		}
	}
	bad, err := c.qp.PostSend(sends[0])
	if bad != sends[queueDepth] || !errors.Is(err, core.ErrQueueFull) {
		s.fatalf("PostSend of %d SENDs on MaxSend %d with none completable returned (%p, %v), want (request %d %p, ErrQueueFull)",
			len(sends), queueDepth, bad, err, queueDepth, sends[queueDepth])
	}
	recvs := make([]*core.RecvRequest, queueDepth+1)
	for i := range recvs {
		recvs[i] = &core.RecvRequest{ID: uint64(100 + i), SGEs: []core.SGE{sge(src, 0, 4096)}}
		if i > 0 {
			recvs[i-1].Next = recvs[i]
		}
	}
	if bad, err := c.qp.PostRecv(recvs[0]); bad != recvs[queueDepth] || !errors.Is(err, core.ErrQueueFull) {
		s.fatalf("PostRecv of %d RECVs on MaxRecv %d returned (%p, %v), want (request %d %p, ErrQueueFull)",
			len(recvs), queueDepth, bad, err, queueDepth, recvs[queueDepth])
	}
	s.step("posted")
	got := s.completions(c.scq, queueDepth, "the SENDs that fit the queue")
	for i, g := range got {
		s.check(g, uint64(i), core.OpSend, core.StatusSuccess)
	}
	// The queue has room again.
	for i := 0; i < queueDepth; i++ {
		s.postSend(c, &core.SendRequest{ID: uint64(10 + i), Op: core.OpSend, Flags: core.SendSignaled,
			SGEs: []core.SGE{sge(src, 0, 128)}})
	}
	s.step("posted again")
	got = s.completions(c.scq, queueDepth, "SENDs posted after the queue drained")
	for i, g := range got {
		s.check(g, uint64(10+i), core.OpSend, core.StatusSuccess)
	}
}

func queueFullB(s *side) {
	c := s.connect(queueConfig)
	dst := s.region(queueDepth*256, core.AccessLocalWrite)
	for round := 0; round < 2; round++ {
		if round == 0 {
			s.await("posted")
		} else {
			s.await("posted again")
		}
		for i := 0; i < queueDepth; i++ {
			s.postRecv(c, &core.RecvRequest{ID: uint64(round*10 + i), SGEs: []core.SGE{sge(dst, i*256, 256)}})
		}
		got := s.completions(c.rcq, queueDepth, "RECVs of the SENDs that fit")
		for i, g := range got {
			s.check(g, uint64(round*10+i), core.OpRecv, core.StatusSuccess)
			if g.ByteLen != 128 {
				s.fatalf("RECV %d: ByteLen %d, want 128", i, g.ByteLen)
			}
		}
	}
}
