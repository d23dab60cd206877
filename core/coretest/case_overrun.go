package coretest

import (
	"errors"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// CQOverrun: three signaled WRITEs complete into a send CQ of depth 2 that
// nobody polls. The queue pair must enter QPError, and Poll must then
// report ErrCQOverrun (possibly after returning what it holds).

const overrunDepth = 2

func overrunA(s *side) {
	cq := s.newCQ(overrunDepth)
	c := s.connect(verbs.QPConfig{SendCQ: cq})
	dst := s.recvRegion()
	src := s.region(64, 0)
	for i := 0; i <= overrunDepth; i++ {
		s.postSend(c, &verbs.SendRequest{ID: uint64(i), Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, 64)}, RemoteAddr: dst.At(0), RemoteKey: dst.Key})
	}
	s.waitState(c.qp, verbs.QPError, "its send CQ overran")
	out := make([]verbs.Completion, 2*overrunDepth+2)
	var got []verbs.Completion
	for {
		n, err := cq.Poll(out)
		got = append(got, out[:n]...)
		if errors.Is(err, verbs.ErrCQOverrun) {
			break
		}
		if err != nil {
			s.fatalf("Poll of an overrun CQ: %v, want ErrCQOverrun", err)
		}
		if n == 0 {
			s.fatalf("Poll of an overrun CQ returned no error after %d completions (%s), want ErrCQOverrun", len(got), fmtCompletions(got))
		}
	}
	if len(got) > overrunDepth {
		s.fatalf("a CQ of depth %d returned %d completions before ErrCQOverrun: %s", overrunDepth, len(got), fmtCompletions(got))
	}
}

func overrunB(s *side) {
	s.connect(verbs.QPConfig{})
	dst := s.region(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
}
