package coretest

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// ConcurrentPosts: PostSend and PostRecv are safe for concurrent use.
// Side A's posters post WRITEs and SENDs on one queue pair at once while
// A polls the send CQ; side B posts its RECVs from two goroutines. Every
// request completes once, each poster's requests complete in its post
// order, and every payload arrives intact (run it under -race).

const (
	concPosters = 4
	concSlot    = 64
	concRecvers = 2
)

var concConfig = verbs.QPConfig{MaxSend: 512, MaxRecv: 512}

func concOps(s *side) int {
	if s.short {
		return 32
	}
	return 64
}

func concSeed(g, i int) uint64 { return 0xc0c0<<32 | uint64(g)<<16 | uint64(i) }

func concID(g, i int) uint64 { return uint64(g)<<16 | uint64(i) }

func concSends(s *side) int { return concPosters * concOps(s) / 2 }

func concA(s *side) {
	ops := concOps(s)
	c := s.connect(concConfig)
	w := s.recvRegion()
	src := s.region(concPosters*ops*concSlot, 0)
	reqs := make([][]*verbs.SendRequest, concPosters)
	for g := range reqs {
		for i := 0; i < ops; i++ {
			slot := (g*ops + i) * concSlot
			p := src.Bytes()[slot : slot+concSlot]
			wr := &verbs.SendRequest{ID: concID(g, i), Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(src, slot, concSlot)}}
			if i%2 == 0 {
				fill(p, concSeed(g, i))
				wr.Op, wr.RemoteAddr, wr.RemoteKey = verbs.OpWrite, w.At(uint64(slot)), w.Key
			} else {
				binary.LittleEndian.PutUint64(p, concSeed(g, i))
				fill(p[8:], concSeed(g, i))
				wr.Op = verbs.OpSend
			}
			reqs[g] = append(reqs[g], wr)
		}
	}
	s.await("recvs posted")
	errs := make(chan error, concPosters)
	for g := range reqs {
		go func() {
			for _, wr := range reqs[g] {
				if bad, err := c.qp.PostSend(wr); err != nil {
					errs <- fmt.Errorf("poster %d: PostSend of request %#x returned (%p, %v)", g, wr.ID, bad, err)
					return
				}
			}
			errs <- nil
		}()
	}
	got := s.completions(c.scq, concPosters*ops, "completions of concurrent posts")
	s.collect(errs, concPosters, "posters")
	next := make([]int, concPosters)
	for _, g := range got {
		p, i := int(g.ID>>16), int(g.ID&0xffff)
		if p >= concPosters || i >= ops || g.Status != verbs.StatusSuccess {
			s.fatalf("unexpected completion %s", fmtCompletion(g))
		}
		if i != next[p] {
			s.fatalf("poster %d: request %d completed after request %d; want post order", p, i, next[p]-1)
		}
		next[p]++
	}
	s.step("sent")
}

func concB(s *side) {
	ops := concOps(s)
	c := s.connect(concConfig)
	w := s.region(concPosters*ops*concSlot, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(w)
	sends := concSends(s)
	rbuf := s.region(sends*concSlot, verbs.AccessLocalWrite)
	errs := make(chan error, concRecvers)
	for r := 0; r < concRecvers; r++ {
		go func() {
			for k := r; k < sends; k += concRecvers {
				wr := &verbs.RecvRequest{ID: uint64(k), SGEs: []verbs.SGE{sge(rbuf, k*concSlot, concSlot)}}
				if bad, err := c.qp.PostRecv(wr); err != nil {
					errs <- fmt.Errorf("receiver %d: PostRecv of request %d returned (%p, %v)", r, k, bad, err)
					return
				}
			}
			errs <- nil
		}()
	}
	s.collect(errs, concRecvers, "receivers")
	s.step("recvs posted")
	got := s.completions(c.rcq, sends, "RECVs of concurrent SENDs")
	seen := make(map[uint64]bool)
	for _, g := range got {
		if g.ID >= uint64(sends) || g.Status != verbs.StatusSuccess || g.Op != verbs.OpRecv || g.ByteLen != concSlot {
			s.fatalf("unexpected RECV completion %s", fmtCompletion(g))
		}
		p := rbuf.Bytes()[g.ID*concSlot : (g.ID+1)*concSlot]
		seed := binary.LittleEndian.Uint64(p)
		if seed>>32 != 0xc0c0 || seen[seed] {
			s.fatalf("RECV %d holds seed %#x: not a SEND's, or a second copy", g.ID, seed)
		}
		seen[seed] = true
		if k := mismatch(p[8:], seed); k >= 0 {
			s.fatalf("RECV %d (seed %#x): payload differs at byte %d", g.ID, seed, k+8)
		}
	}
	s.await("sent")
	for g := 0; g < concPosters; g++ {
		for i := 0; i < ops; i += 2 {
			slot := (g*ops + i) * concSlot
			if k := mismatch(w.Bytes()[slot:slot+concSlot], concSeed(g, i)); k >= 0 {
				s.fatalf("WRITE %d of poster %d differs at byte %d", i, g, k)
			}
		}
	}
}

// collect waits for n results of helper goroutines, up to the deadline.
func (s *side) collect(errs <-chan error, n int, who string) {
	timer := time.NewTimer(time.Until(s.deadline))
	defer timer.Stop()
	for ; n > 0; n-- {
		select {
		case err := <-errs:
			if err != nil {
				s.fatalf("%v", err)
			}
		case <-timer.C:
			s.fatalf("deadline passed waiting for the %s: stuck in a provider call", who)
		}
	}
}
