package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// RegionAfterConnect: regions registered after Connect, on either side,
// are usable at once: the owner advertises them over the link and the
// peer READs and WRITEs them; local regions registered after Connect work
// as SGEs. Three rounds in each direction, with traffic in between.

const lateSize = 8192

func lateRegionA(s *side) {
	c := s.connect(verbs.QPConfig{})
	lateUse(s, c, 0)
	lateOffer(s, c, 1)
}

func lateRegionB(s *side) {
	c := s.connect(verbs.QPConfig{})
	lateOffer(s, c, 0)
	lateUse(s, c, 1)
}

// lateOffer registers three regions one after another, fills each with a
// pattern, advertises it, and checks the pattern the peer writes back.
func lateOffer(s *side, _ *conn, dir int) {
	for k := 0; k < 3; k++ {
		r := s.region(lateSize, accessAll)
		fill(r.Bytes(), lateSeed(dir, k, 0))
		s.sendRegion(r)
		s.await("written")
		if i := mismatch(r.Bytes(), lateSeed(dir, k, 1)); i >= 0 {
			s.fatalf("region %d registered after Connect: the peer's WRITE differs at byte %d", k, i)
		}
	}
}

// lateUse READs each advertised region, then WRITEs a new pattern to it,
// through local regions registered after Connect as well.
func lateUse(s *side, c *conn, dir int) {
	for k := 0; k < 3; k++ {
		remote := s.recvRegion()
		dst := s.region(lateSize, verbs.AccessLocalWrite)
		id := uint64(2 * k)
		s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpRead, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(dst, 0, lateSize)}, RemoteAddr: remote.At(0), RemoteKey: remote.Key})
		s.one(c.scq, id, verbs.OpRead, verbs.StatusSuccess)
		if i := mismatch(dst.Bytes(), lateSeed(dir, k, 0)); i >= 0 {
			s.fatalf("READ of region %d registered by the peer after Connect differs at byte %d", k, i)
		}
		fill(dst.Bytes(), lateSeed(dir, k, 1))
		s.postSend(c, &verbs.SendRequest{ID: id + 1, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(dst, 0, lateSize)}, RemoteAddr: remote.At(0), RemoteKey: remote.Key})
		s.one(c.scq, id+1, verbs.OpWrite, verbs.StatusSuccess)
		s.step("written")
	}
}

func lateSeed(dir, k, gen int) uint64 { return uint64(0x1a7e<<16 | dir<<8 | k<<4 | gen) }
