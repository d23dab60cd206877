package coretest

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// ReadSeesLatestWrite: side A WRITEs a fresh pattern to a random range of
// side B's region, waits for the completion, then READs the range back
// (scattered over one or two local regions) and must get exactly that
// pattern. Every fourth round B stores the pattern with plain local stores
// instead and reports it over the link before A READs.

const readRegionSize = 64 << 10

func readRounds(s *side) int {
	if s.short {
		return 60
	}
	return 200
}

func readLatestA(s *side) {
	c := s.connect(verbs.QPConfig{})
	remote := s.recvRegion()
	src := s.region(readRegionSize, 0)
	dst := s.region(readRegionSize, verbs.AccessLocalWrite)
	dst2 := s.region(readRegionSize, verbs.AccessLocalWrite)
	id := uint64(0)
	for i := 0; i < readRounds(s); i++ {
		seed := uint64(1000 + i)
		off := s.rng.IntN(readRegionSize)
		n := 1 + s.rng.IntN(readRegionSize-off)
		if i == 0 {
			off, n = 0, readRegionSize
		}
		if i%4 == 3 {
			s.sendWords(1, uint64(off), uint64(n), seed)
			s.await("stored")
		} else {
			fill(src.Bytes()[off:off+n], seed)
			id++
			s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
				SGEs: []verbs.SGE{sge(src, off, n)}, RemoteAddr: remote.At(uint64(off)), RemoteKey: remote.Key})
			s.one(c.scq, id, verbs.OpWrite, verbs.StatusSuccess)
		}

		// READ the range back into one SGE, or two in different regions.
		k := n
		if n > 1 && s.rng.IntN(2) == 0 {
			k = 1 + s.rng.IntN(n-1)
		}
		l1 := s.rng.IntN(readRegionSize - k + 1)
		l2 := s.rng.IntN(readRegionSize - (n - k) + 1)
		poison(dst.Bytes()[l1 : l1+k])
		sges := []verbs.SGE{sge(dst, l1, k)}
		if k < n {
			poison(dst2.Bytes()[l2 : l2+n-k])
			sges = append(sges, sge(dst2, l2, n-k))
		}
		id++
		s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpRead, Flags: verbs.SendSignaled,
			SGEs: sges, RemoteAddr: remote.At(uint64(off)), RemoteKey: remote.Key})
		rc := s.one(c.scq, id, verbs.OpRead, verbs.StatusSuccess)
		if rc.ByteLen != uint32(n) {
			s.fatalf("READ of %d bytes completed with ByteLen %d", n, rc.ByteLen)
		}
		got := append(append([]byte(nil), dst.Bytes()[l1:l1+k]...), dst2.Bytes()[l2:l2+n-k]...)
		if j := mismatch(got, seed); j >= 0 {
			how := "WRITE completed"
			if i%4 == 3 {
				how = "owner stored it"
			}
			s.fatalf("round %d: READ of [%d, %d) after the %s differs at byte %d (%d SGEs)", i, off, off+n, how, j, len(sges))
		}
	}
	s.sendWords(0, 0, 0, 0)
}

func readLatestB(s *side) {
	s.connect(verbs.QPConfig{})
	r := s.region(readRegionSize, accessAll)
	s.sendRegion(r)
	for {
		v := s.recvWords(4)
		if v[0] == 0 {
			return
		}
		off, n := int(v[1]), int(v[2])
		if off < 0 || n < 0 || off+n > readRegionSize {
			s.fatalf("bad store request %v", v)
		}
		fill(r.Bytes()[off:off+n], v[3])
		s.step("stored")
	}
}

func poison(p []byte) {
	for i := range p {
		p[i] = 0xee
	}
}
