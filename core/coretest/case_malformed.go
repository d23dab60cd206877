package coretest

import (
	"math"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// MalformedRequests: requests that pass post-time validation but cannot
// execute (bad keys, out-of-range offsets and lengths, missing rights,
// closed regions, a SEND larger than the RECV) must be accepted by
// PostSend and fail as the specified error completion, followed by
// StatusFlushed for the request behind them, with the queue pair in
// QPError — never a crash or a hang. Each part runs on a fresh pair of
// queue pairs; both sides walk the same table.

// anyError accepts every status but success, where the contract names
// none.
const anyError verbs.Status = math.MaxUint8

// peerPrep is what side B does before side A posts.
type peerPrep uint8

const (
	prepNone        peerPrep = iota
	prepImmRecv              // post an empty RECV (not checked)
	prepSmallRecv            // post a 64-byte RECV; it must fail StatusLocalLength
	prepBadKeyRecv           // post a RECV with a bad local key; it must fail StatusLocalProtection
	prepCloseRegion          // close the extra region before A uses it
	prepLongRecv             // post a RECV whose SGE passes its region; it must fail StatusLocalLength
)

// malformedEnv holds the regions the parts name.
type malformedEnv struct {
	src, noWrite verbs.Region // local: 4096 bytes with local write / none
	small        verbs.Region // local: 100 bytes, less than a page
	closedKey    uint32       // local key of a region already closed
	r, ro, wo    verbs.RemoteRegion
	rsmall       verbs.RemoteRegion // 100 bytes with every right
	extra        verbs.RemoteRegion // per part; closed by B in prepCloseRegion
}

const badKeyMask = 0xa5a5a5a5

var malformedParts = []struct {
	name string
	want verbs.Status
	prep peerPrep
	wr   func(e *malformedEnv) *verbs.SendRequest
}{
	{"bad local key", verbs.StatusLocalProtection, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, 0, verbs.SGE{Key: e.src.LocalKey() ^ badKeyMask, Length: 16})
	}},
	{"local key of a closed region", verbs.StatusLocalProtection, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, 0, verbs.SGE{Key: e.closedKey, Length: 16})
	}},
	{"SGE past the end of its region", verbs.StatusLocalLength, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, 0, sge(e.src, 4090, 16))
	}},
	{"SGE offset overflows", verbs.StatusLocalLength, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, 0, verbs.SGE{Key: e.src.LocalKey(), Offset: math.MaxUint64 - 7, Length: 16})
	}},
	{"SGE past the end of a region smaller than a page", verbs.StatusLocalLength, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, 0, sge(e.small, 96, 8))
	}},
	{"READ into an SGE past its region", verbs.StatusLocalLength, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return readFrom(e.r, 0, sge(e.src, 4090, 16))
	}},
	{"READ into a region without local write", verbs.StatusLocalProtection, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return readFrom(e.r, 0, sge(e.noWrite, 0, 16))
	}},
	{"bad remote key", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		wr := writeTo(e.r, 0, sge(e.src, 0, 16))
		wr.RemoteKey ^= badKeyMask
		return wr
	}},
	{"remote offset at the end", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, e.r.Len, sge(e.src, 0, 1))
	}},
	{"remote range past the end", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.r, e.r.Len-16, sge(e.src, 0, 32))
	}},
	{"remote address wraps", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		wr := writeTo(e.r, 0, sge(e.src, 0, 16))
		wr.RemoteAddr = math.MaxUint64 - 7
		return wr
	}},
	{"remote range past the end of a region smaller than a page", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.rsmall, 96, sge(e.src, 0, 8))
	}},
	{"READ with a bad remote key", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		wr := readFrom(e.r, 0, sge(e.src, 0, 16))
		wr.RemoteKey ^= badKeyMask
		return wr
	}},
	{"READ past the end", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return readFrom(e.r, e.r.Len-16, sge(e.src, 0, 32))
	}},
	{"WRITE to a region without remote write", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.ro, 0, sge(e.src, 0, 16))
	}},
	{"READ from a region without remote read", verbs.StatusRemoteAccess, prepNone, func(e *malformedEnv) *verbs.SendRequest {
		return readFrom(e.wo, 0, sge(e.src, 0, 16))
	}},
	{"WRITE_WITH_IMM with a bad remote key", verbs.StatusRemoteAccess, prepImmRecv, func(e *malformedEnv) *verbs.SendRequest {
		wr := writeTo(e.r, 0, sge(e.src, 0, 16))
		wr.Op, wr.Imm = verbs.OpWriteWithImm, 5
		wr.RemoteKey ^= badKeyMask
		return wr
	}},
	{"WRITE to a closed remote region", verbs.StatusRemoteAccess, prepCloseRegion, func(e *malformedEnv) *verbs.SendRequest {
		return writeTo(e.extra, 0, sge(e.src, 0, 16))
	}},
	{"SEND larger than the RECV", verbs.StatusRemoteInvalid, prepSmallRecv, func(e *malformedEnv) *verbs.SendRequest {
		return &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(e.src, 0, 128)}}
	}},
	{"SEND into a RECV whose SGE passes its region", anyError, prepLongRecv, func(e *malformedEnv) *verbs.SendRequest {
		return &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(e.src, 0, 16)}}
	}},
	{"SEND into a RECV with a bad local key", anyError, prepBadKeyRecv, func(e *malformedEnv) *verbs.SendRequest {
		return &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{sge(e.src, 0, 16)}}
	}},
}

func writeTo(r verbs.RemoteRegion, off uint64, s verbs.SGE) *verbs.SendRequest {
	return &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{s}, RemoteAddr: r.At(off), RemoteKey: r.Key}
}

func readFrom(r verbs.RemoteRegion, off uint64, s verbs.SGE) *verbs.SendRequest {
	wr := writeTo(r, off, s)
	wr.Op = verbs.OpRead
	return wr
}

func malformedA(s *side) {
	e := &malformedEnv{
		src:     s.region(4096, verbs.AccessLocalWrite),
		noWrite: s.region(4096, accessNone),
		small:   s.region(100, verbs.AccessLocalWrite),
	}
	closed, err := s.p.RegisterRegion(4096, verbs.AccessLocalWrite)
	s.must(err, "RegisterRegion")
	e.closedKey = closed.LocalKey()
	s.must(closed.Close(), "close region")
	e.r, e.ro, e.wo, e.rsmall = s.recvRegion(), s.recvRegion(), s.recvRegion(), s.recvRegion()
	ok := s.region(64, 0)

	for i, part := range malformedParts {
		s.sendWords(uint64(i))
		c := s.connect(verbs.QPConfig{})
		e.extra = s.recvRegion()
		s.await("ready")
		wr := part.wr(e)
		if bad, err := c.qp.PostSend(wr); err != nil {
			s.fatalf("%s: PostSend refused the request (bad %p): %v; the contract makes it an error completion", part.name, bad, err)
		}
		s.postSend(c, &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(ok, 0, 64)}, RemoteAddr: e.r.At(0), RemoteKey: e.r.Key})
		got := s.completions(c.scq, 2, part.name+": the bad request and the one behind it")
		if part.want == anyError {
			if got[0].ID != 1 || got[0].Status == verbs.StatusSuccess {
				s.fatalf("%s: completion %s, want request 1 with an error status", part.name, fmtCompletion(got[0]))
			}
			s.logf("%s: the sender got %v", part.name, got[0].Status)
		} else if got[0].ID != 1 || got[0].Status != part.want {
			s.fatalf("%s: completion %s, want request 1 with %v", part.name, fmtCompletion(got[0]), part.want)
		}
		if got[1].ID != 2 || got[1].Status != verbs.StatusFlushed {
			s.fatalf("%s: the request behind the failed one completed %s, want request 2 flushed", part.name, fmtCompletion(got[1]))
		}
		s.waitState(c.qp, verbs.QPError, part.name)
		s.step("part done")
	}
	s.sendWords(math.MaxUint64)
}

func malformedB(s *side) {
	for _, r := range []verbs.Region{
		s.region(4096, accessAll),
		s.region(4096, verbs.AccessLocalWrite|verbs.AccessRemoteRead),
		s.region(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite),
		s.region(100, accessAll),
	} {
		s.sendRegion(r)
	}
	rbuf := s.region(4096, verbs.AccessLocalWrite)
	for {
		i := s.recvWords(1)[0]
		if i >= uint64(len(malformedParts)) {
			return
		}
		part := malformedParts[i]
		c := s.connect(verbs.QPConfig{})
		extra, err := s.p.RegisterRegion(4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		s.must(err, "RegisterRegion")
		o := s.own("extra region", extra)
		s.sendRegion(extra)
		want := verbs.StatusSuccess
		switch part.prep {
		case prepImmRecv:
			s.postRecv(c, &verbs.RecvRequest{ID: 900})
		case prepSmallRecv:
			s.postRecv(c, &verbs.RecvRequest{ID: 900, SGEs: []verbs.SGE{sge(rbuf, 0, 64)}})
			want = verbs.StatusLocalLength
		case prepBadKeyRecv:
			s.postRecv(c, &verbs.RecvRequest{ID: 900, SGEs: []verbs.SGE{{Key: rbuf.LocalKey() ^ badKeyMask, Length: 64}}})
			want = verbs.StatusLocalProtection
		case prepLongRecv:
			s.postRecv(c, &verbs.RecvRequest{ID: 900, SGEs: []verbs.SGE{sge(rbuf, 4090, 16)}})
			want = verbs.StatusLocalLength
		case prepCloseRegion:
			s.closeNow(o)
		}
		s.step("ready")
		if want != verbs.StatusSuccess {
			s.one(c.rcq, 900, verbs.OpRecv, want)
		}
		s.await("part done")
	}
}
