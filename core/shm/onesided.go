package shm

import (
	"github.com/sdpshim/sdpshim/core/verbs"
)

// maxTransfer bounds one request's length (2^31 bytes, the RC message limit).
const maxTransfer = 1 << 31

// execWrite copies the gather list sges (or, when sges is nil, payload)
// into the peer region rkey at offset raddr. A transfer of 1, 2, 4 or 8
// bytes to an address aligned to its size is one atomic store, so a peer
// polling that word sees the old or the new value. The copy is followed by
// a full barrier: it is visible before any effect of a later request.
func (q *queuePair) execWrite(sges []verbs.SGE, payload []byte, raddr uint64, rkey uint32) (uint32, verbs.Status) {
	total := uint64(len(payload))
	if sges != nil {
		total = 0
		for _, s := range sges {
			total += uint64(s.Length)
		}
	}
	if total == 0 {
		return 0, verbs.StatusSuccess
	}
	if total > maxTransfer {
		return 0, verbs.StatusLocalLength
	}
	dst, st := q.acquireRemote(rkey, raddr, total, verbs.AccessRemoteWrite)
	if st != verbs.StatusSuccess {
		return 0, st
	}
	switch {
	case sges == nil && smallAligned(total, raddr):
		storeSmall(dst, payload)
	case sges == nil:
		copy(dst, payload)
	case smallAligned(total, raddr):
		var tmp [8]byte
		if st = q.gatherLocal(sges, tmp[:total]); st == verbs.StatusSuccess {
			storeSmall(dst, tmp[:total])
		}
	default:
		st = q.gatherLocal(sges, dst)
	}
	q.fence.Add(1)
	return uint32(total), st
}

// execRead copies total bytes of the peer region rkey at offset raddr into
// the scatter list sges, which must name regions with local write access.
// An aligned 1/2/4/8-byte read is one atomic load.
func (q *queuePair) execRead(sges []verbs.SGE, raddr uint64, rkey uint32) (uint32, verbs.Status) {
	var total uint64
	for _, s := range sges {
		total += uint64(s.Length)
	}
	if total == 0 {
		return 0, verbs.StatusSuccess
	}
	if total > maxTransfer {
		return 0, verbs.StatusLocalLength
	}
	src, st := q.acquireRemote(rkey, raddr, total, verbs.AccessRemoteRead)
	if st != verbs.StatusSuccess {
		return 0, st
	}
	if smallAligned(total, raddr) {
		var tmp [8]byte
		loadSmall(tmp[:total], src)
		st = q.scatterLocal(tmp[:total], sges)
	} else {
		st = q.scatterLocal(src, sges)
	}
	return uint32(total), st
}

// acquireRemote returns n bytes at offset off of the peer region key. An
// unknown key first drains pending region announcements, then is looked up
// again. The caller holds sqMu, which keeps the mapping in place while it
// uses the bytes.
func (q *queuePair) acquireRemote(key uint32, off, n uint64, need verbs.Access) ([]byte, verbs.Status) {
	rr := q.lastRemote
	if rr == nil || q.lastKey != key {
		if rr = q.remote[key]; rr == nil {
			q.awaitAnnouncements()
			rr = q.remote[key]
		}
		q.lastKey, q.lastRemote = key, rr
	}
	if rr == nil || rr.access&need == 0 || off > rr.length || n > rr.length-off {
		return nil, verbs.StatusRemoteAccess
	}
	return rr.mem[off : off+n], verbs.StatusSuccess
}

// smallAligned reports whether n bytes at off move as one atomic access.
func smallAligned(n, off uint64) bool {
	return (n == 1 || n == 2 || n == 4 || n == 8) && off%n == 0
}

// localSpan returns the bytes an SGE names, with its region acquired; the
// caller releases the region. write requires AccessLocalWrite.
func (q *queuePair) localSpan(s verbs.SGE, write bool) ([]byte, *region, verbs.Status) {
	r := q.p.regions.lookup(s.Key)
	if r == nil || (write && r.access&verbs.AccessLocalWrite == 0) {
		return nil, nil, verbs.StatusLocalProtection
	}
	mem := r.acquire()
	if mem == nil {
		return nil, nil, verbs.StatusLocalProtection
	}
	if s.Offset > uint64(len(mem)) || uint64(s.Length) > uint64(len(mem))-s.Offset {
		r.release()
		return nil, nil, verbs.StatusLocalLength
	}
	return mem[s.Offset : s.Offset+uint64(s.Length)], r, verbs.StatusSuccess
}

// gatherLocal copies the bytes named by sges into dst, whose length is
// their total. Zero-length SGEs are skipped without a key check.
func (q *queuePair) gatherLocal(sges []verbs.SGE, dst []byte) verbs.Status {
	o := 0
	for _, s := range sges {
		if s.Length == 0 {
			continue
		}
		src, r, st := q.localSpan(s, false)
		if st != verbs.StatusSuccess {
			return st
		}
		o += copy(dst[o:], src)
		r.release()
	}
	return verbs.StatusSuccess
}

// scatterLocal copies src into the regions named by sges, in order; the
// SGEs must hold at least len(src) bytes (the caller checks).
func (q *queuePair) scatterLocal(src []byte, sges []verbs.SGE) verbs.Status {
	for _, s := range sges {
		if len(src) == 0 {
			break
		}
		if s.Length == 0 {
			continue
		}
		dst, r, st := q.localSpan(s, true)
		if st != verbs.StatusSuccess {
			return st
		}
		n := copy(dst, src)
		r.release()
		src = src[n:]
	}
	return verbs.StatusSuccess
}
