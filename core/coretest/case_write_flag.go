package coretest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// WriteThenFlag: the status-byte pattern. Side A WRITEs a payload (its
// length and CRC in its first 8 bytes) and then an inline WRITE of a flag
// word holding the iteration number; side B polls the flag with an atomic
// load and checks the whole payload the moment the flag appears. Sizes are
// random; the two WRITEs are chained or posted apart, the payload WRITE
// signaled or not. A scribbles over the inline source right after posting,
// which an inline WRITE must tolerate.

const flagMaxPayload = 64 << 10

func flagIterations(s *side) int {
	if s.short {
		return 100
	}
	return 400
}

func writeFlagA(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.recvRegion()
	src := s.region(flagMaxPayload, 0)
	flag := s.region(64, 0)
	edges := []int{8, 9, 12, 4095, 4096, 4097, flagMaxPayload}
	id := uint64(0)
	for i := 1; i <= flagIterations(s); i++ {
		n := 8 + s.rng.IntN(flagMaxPayload-7)
		if i <= len(edges) {
			n = edges[i-1]
		}
		p := src.Bytes()[:n]
		fill(p[8:], uint64(i))
		binary.LittleEndian.PutUint32(p[0:], uint32(n))
		binary.LittleEndian.PutUint32(p[4:], crc32.ChecksumIEEE(p[8:]))
		binary.LittleEndian.PutUint32(flag.Bytes(), uint32(i))

		id++
		data := &verbs.SendRequest{ID: id, Op: verbs.OpWrite,
			SGEs: []verbs.SGE{sge(src, 0, n)}, RemoteAddr: dst.At(0), RemoteKey: dst.Key}
		want := 1
		if s.rng.IntN(2) == 0 {
			data.Flags |= verbs.SendSignaled
			want = 2
		}
		id++
		flagWR := &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline,
			SGEs: []verbs.SGE{sge(flag, 0, 4)}, RemoteAddr: dst.At(flagMaxPayload), RemoteKey: dst.Key}
		if s.rng.IntN(2) == 0 {
			data.Next = flagWR
			s.postSend(c, data)
		} else {
			s.postSend(c, data)
			s.postSend(c, flagWR)
		}
		// Inline: the payload was copied at post time.
		binary.LittleEndian.PutUint32(flag.Bytes(), 0xdeadbeef)
		got := s.completions(c.scq, want, "the payload and flag WRITEs")
		if want == 2 {
			s.check(got[0], data.ID, verbs.OpWrite, verbs.StatusSuccess)
		}
		s.check(got[want-1], flagWR.ID, verbs.OpWrite, verbs.StatusSuccess)
		if v := s.recvWords(1); v[0] != uint64(i) {
			s.fatalf("peer acknowledged iteration %d, want %d", v[0], i)
		}
	}
}

func writeFlagB(s *side) {
	s.connect(verbs.QPConfig{})
	dst := s.region(flagMaxPayload+64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	b := dst.Bytes()
	for i := 1; i <= flagIterations(s); i++ {
		s.waitWord(b, flagMaxPayload, uint32(i), "the flag WRITE")
		n := binary.LittleEndian.Uint32(b[0:])
		sum := binary.LittleEndian.Uint32(b[4:])
		if n < 8 || n > flagMaxPayload {
			s.fatalf("iteration %d: flag seen but payload header says %d bytes: the payload WRITE is not visible before the flag", i, n)
		}
		if got := crc32.ChecksumIEEE(b[8:n]); got != sum {
			s.fatalf("iteration %d: flag seen but the %d-byte payload has CRC %#x, want %#x (first bad byte %d): torn payload", i, n, got, sum, mismatch(b[8:n], uint64(i))+8)
		}
		s.sendWords(uint64(i))
	}
}
