package shm

import (
	"encoding/binary"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// sendEntry is a send request that could not run at post time, or a SEND
// or WRITE_WITH_IMM whose record is on the wire awaiting the peer's
// acknowledgement. Its SGEs and inline payload are copies: the caller's
// SendRequest may be reused once PostSend returns.
type sendEntry struct {
	id       uint64
	op       verbs.Opcode
	signaled bool
	inline   bool
	hasImm   bool
	imm      uint32
	rkey     uint32
	raddr    uint64
	sges     []verbs.SGE // backed by sgeBuf
	sgeBuf   []verbs.SGE // cap lim.maxSGE
	stash    []byte      // inline payload; cap lim.maxInline
	failed   bool        // status below was found before execution
	status   verbs.Status
	wirePos  uint64 // ring position of the record
	endPos   uint64 // ring position after the record
	byteLen  uint32
	oneSided bool
}

// sendQueue is a FIFO of entries: [head, exec) have records on the wire
// and wait for acknowledgement, [exec, tail) wait to execute. Completions
// leave in FIFO order.
type sendQueue struct {
	ents             []sendEntry
	head, exec, tail uint64
	prod             uint64 // ring bytes produced into the peer's inbound ring
	acked            uint64 // ring bytes the peer acknowledged (validated)
	peerReady        bool   // the peer has connected
}

func (s *sendQueue) init(lim qpLimits) {
	s.ents = make([]sendEntry, lim.maxSend)
	sges := make([]verbs.SGE, lim.maxSend*lim.maxSGE)
	stash := make([]byte, lim.maxSend*lim.maxInline)
	for i := range s.ents {
		s.ents[i].sgeBuf = sges[i*lim.maxSGE : (i+1)*lim.maxSGE : (i+1)*lim.maxSGE]
		s.ents[i].stash = stash[i*lim.maxInline : (i+1)*lim.maxInline : (i+1)*lim.maxInline]
	}
}

func (s *sendQueue) at(i uint64) *sendEntry { return &s.ents[i%uint64(len(s.ents))] }
func (s *sendQueue) empty() bool            { return s.head == s.tail }
func (s *sendQueue) full() bool             { return s.tail-s.head == uint64(len(s.ents)) }

// progressSendLocked advances the send queue: it takes acknowledgements,
// reacts to the peer's state, and executes waiting entries in order until
// one must wait (for an acknowledgement, ring space or the peer's Connect).
func (q *queuePair) progressSendLocked() {
	if verbs.QPState(q.state.Load()) != verbs.QPReady || !q.peer.mapped() {
		return
	}
	ps := q.peer.state.Load()
	q.peerStateSeen.Store(ps)
	if !q.sq.peerReady {
		if ps == wireInit {
			return
		}
		q.sq.peerReady = ps == wireReady
	}
	if !q.ackLocked() {
		return
	}
	if ps != wireReady {
		q.failLocked(verbs.StatusRetryExceeded)
		return
	}
	if q.announcementsPending() {
		q.drainAnnouncements()
	}
	produced := false
	for q.sq.exec != q.sq.tail {
		e := q.sq.at(q.sq.exec)
		// Records on the wire the peer has not consumed yet: e must not
		// take effect at the peer before them.
		behind := q.sq.head != q.sq.exec
		if behind && (e.failed || !q.ringCarries(e)) {
			// A failed request waits so that those complete first; a
			// READ, or a WRITE too large for the ring, waits for their
			// acknowledgement.
			break
		}
		if e.failed {
			q.failLocked(verbs.StatusFlushed) // e is the oldest: it gets its own status
			return
		}
		if e.oneSided && !behind {
			n, st := q.execEntry(e)
			if st != verbs.StatusSuccess {
				e.failed, e.status = true, st
				continue
			}
			q.sq.exec++
			q.completeHeadLocked(verbs.StatusSuccess, n)
			continue
		}
		ok, st := q.putOnWireLocked(e, behind)
		if st != verbs.StatusSuccess {
			e.failed, e.status = true, st
			continue
		}
		if !ok {
			break // ring full: an acknowledgement will wake us
		}
		q.sq.exec++
		produced = true
	}
	if produced {
		q.peer.prod.Store(q.sq.prod) // release: records are complete
		q.ringPeer()
	}
}

// execEntry runs a queued one-sided entry.
func (q *queuePair) execEntry(e *sendEntry) (uint32, verbs.Status) {
	if e.op == verbs.OpRead {
		return q.execRead(e.sges, e.raddr, e.rkey)
	}
	if e.inline {
		return q.execWrite(nil, e.stash, e.raddr, e.rkey)
	}
	return q.execWrite(e.sges, nil, e.raddr, e.rkey)
}

// ackLocked completes wire entries the peer acknowledged. A consumer
// position that moved backwards or past what was produced is a protocol
// violation: the queue pair fails and ackLocked returns false.
func (q *queuePair) ackLocked() bool {
	c := q.peer.cons.Load()
	if c == q.sq.acked {
		return true
	}
	if c-q.sq.acked > q.sq.prod-q.sq.acked || c%recAlign != 0 {
		q.failLocked(verbs.StatusRemoteInvalid)
		return false
	}
	q.sq.acked = c
	q.ackedPos.Store(c)
	for q.sq.head != q.sq.exec {
		e := q.sq.at(q.sq.head)
		if e.endPos > c { // positions only grow: 2^64 ring bytes never wrap
			break
		}
		q.completeHeadLocked(verbs.StatusSuccess, e.byteLen)
	}
	return true
}

// ringCarries reports whether e can go on the wire behind records the
// peer has not consumed: a SEND always can, a WRITE or WRITE_WITH_IMM when
// its data fits a ring record (it then travels in the ring and the peer
// executes it in order), a READ never (it must see the effects of the
// requests before it, so it waits for their acknowledgement).
func (q *queuePair) ringCarries(e *sendEntry) bool {
	switch e.op {
	case verbs.OpSend:
		return true
	case verbs.OpWrite, verbs.OpWriteWithImm:
		return entryLength(e) <= MaxMessageSize
	}
	return false
}

// entryLength returns the bytes e's SGEs (or inline payload) name.
func entryLength(e *sendEntry) uint64 {
	if e.inline {
		return uint64(len(e.stash))
	}
	var n uint64
	for _, s := range e.sges {
		n += uint64(s.Length)
	}
	return n
}

// putOnWireLocked writes e's record into the peer's inbound ring: a SEND
// with its payload; a WRITE_WITH_IMM whose data it writes now, or, when
// carried (behind unconsumed records), a WRITE or WRITE_WITH_IMM whose data
// travels in the record for the peer to write. It returns false without
// side effects when the ring lacks space, and a status other than success
// when e cannot be sent.
func (q *queuePair) putOnWireLocked(e *sendEntry, carried bool) (bool, verbs.Status) {
	var payload, data uint64
	kind := uint32(recWriteImm)
	switch {
	case e.op == verbs.OpSend:
		kind = recSend
		if e.hasImm {
			kind = recSendImm
		}
		data = entryLength(e)
		if data > MaxMessageSize {
			return false, verbs.StatusLocalLength
		}
		payload = data
	case carried:
		kind = recWriteData
		if e.op == verbs.OpWrite {
			kind = recWrite
		}
		data = entryLength(e)
		payload = writeHeader + data
	}
	size := recordSize(payload)
	pos := q.sq.prod
	off := pos % ringSize
	var pad uint64
	if off+size > ringSize {
		pad = ringSize - off
	}
	if pos-q.sq.acked+pad+size > ringSize {
		return false, verbs.StatusSuccess
	}
	switch {
	case carried && e.op != verbs.OpSend:
		// Checked here as a direct WRITE would be; the peer checks again
		// (the region may be gone by the time it executes the record).
		if data > 0 {
			if _, st := q.acquireRemote(e.rkey, e.raddr, data, verbs.AccessRemoteWrite); st != verbs.StatusSuccess {
				return false, st
			}
		}
	case e.op == verbs.OpWriteWithImm:
		n, st := q.execEntryWrite(e)
		if st != verbs.StatusSuccess {
			return false, st
		}
		e.byteLen = n
	}
	if pad > 0 {
		putRecordHeader(q.peer.ring, off, 0, recPad, 0)
		pos += pad
		off = 0
	}
	if e.op == verbs.OpSend || carried {
		body := q.peer.ring[off+recHeader : off+recHeader+payload]
		if e.op != verbs.OpSend {
			binary.LittleEndian.PutUint64(body[0:], e.raddr)
			binary.LittleEndian.PutUint32(body[8:], e.rkey)
			binary.LittleEndian.PutUint32(body[12:], 0)
			body = body[writeHeader:]
		}
		if e.inline {
			copy(body, e.stash)
		} else if st := q.gatherLocal(e.sges, body); st != verbs.StatusSuccess {
			return false, st
		}
		e.byteLen = uint32(data)
	}
	putRecordHeader(q.peer.ring, off, e.byteLen, kind, e.imm)
	e.wirePos = pos
	e.endPos = pos + size
	q.sq.prod = e.endPos
	return true, verbs.StatusSuccess
}

// execEntryWrite runs the data part of a WRITE_WITH_IMM.
func (q *queuePair) execEntryWrite(e *sendEntry) (uint32, verbs.Status) {
	if e.inline {
		return q.execWrite(nil, e.stash, e.raddr, e.rkey)
	}
	return q.execWrite(e.sges, nil, e.raddr, e.rkey)
}

// completeHeadLocked retires the head entry with status st.
func (q *queuePair) completeHeadLocked(st verbs.Status, n uint32) {
	e := q.sq.at(q.sq.head)
	if e.signaled || st != verbs.StatusSuccess {
		q.sendCQ.push(verbs.Completion{ID: e.id, QP: q.num, Op: e.op, Status: st, ByteLen: n})
	}
	q.sq.head++
	if q.sq.head == q.sq.tail {
		q.sqBusy.Store(false)
	}
}

// flushSendLocked completes every entry in order: an entry that failed
// with its own status, the oldest other one with first, the rest with
// StatusFlushed. A wire entry the peer rejected (nack) completes with
// the status the peer gave (see nackStatus).
func (q *queuePair) flushSendLocked(first verbs.Status) {
	var nack uint64
	if q.peer.mapped() {
		nack = q.peer.nack.Load()
	}
	oldest, exec := q.sq.head, q.sq.exec
	for i := oldest; i != q.sq.tail; i++ {
		e := q.sq.at(i)
		st := verbs.StatusFlushed
		switch {
		case e.failed:
			st = e.status
		case i < exec && nack != 0 && nack-1 == e.wirePos:
			st = nackStatus(q.peer.nackSt.Load())
		case i == oldest:
			st = first
		}
		q.completeHeadLocked(st, 0)
	}
	q.sq.exec = q.sq.head
}

// nackStatus maps the status word of a peer's rejection: a carried write
// the peer could not execute is StatusRemoteAccess; anything else (a
// record its receive could not take, or a value this build does not
// know) is StatusRemoteInvalid.
func nackStatus(v uint32) verbs.Status {
	if verbs.Status(v) == verbs.StatusRemoteAccess {
		return verbs.StatusRemoteAccess
	}
	return verbs.StatusRemoteInvalid
}

// enterErrorLocked moves an Init or Ready queue pair to QPError and tells
// the peer; it reports false when the queue pair was already in error or
// closed.
func (q *queuePair) enterErrorLocked() bool {
	for {
		s := q.state.Load()
		if s != uint32(verbs.QPInit) && s != uint32(verbs.QPReady) {
			return false
		}
		if q.state.CompareAndSwap(s, uint32(verbs.QPError)) {
			break
		}
	}
	q.failPending.Store(false)
	q.my.state.Store(wireError)
	if q.peer.mapped() {
		q.ringPeer()
	}
	return true
}

// failLocked moves the queue pair to QPError and flushes both queues;
// first is the status of the oldest outstanding send request that has none
// of its own. The caller holds sqMu (and not rqMu).
func (q *queuePair) failLocked(first verbs.Status) {
	if !q.enterErrorLocked() {
		return
	}
	q.flushSendLocked(first)
	q.flushRecv()
}

// fail is failLocked for callers that hold no queue pair lock.
func (q *queuePair) fail(first verbs.Status) {
	q.sqMu.Lock()
	q.failLocked(first)
	q.sqMu.Unlock()
}

// requestFail asks for QPError from a context that may hold this queue
// pair's locks (a completion queue overrun); the posting paths and the NIC
// goroutine apply it.
func (q *queuePair) requestFail() {
	q.failPending.Store(true)
	q.kickNIC()
}
