package shm

import (
	"encoding/binary"
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// recvEntry is a posted receive; its SGEs are a copy of the request's.
type recvEntry struct {
	id     uint64
	sges   []verbs.SGE
	sgeBuf []verbs.SGE
}

// recvQueue is the FIFO of posted receives.
type recvQueue struct {
	ents       []recvEntry
	head, tail uint64
	waiting    bool // the NIC found a record and no receive for it
}

func (r *recvQueue) init(lim qpLimits) {
	r.ents = make([]recvEntry, lim.maxRecv)
	sges := make([]verbs.SGE, lim.maxRecv*lim.maxSGE)
	for i := range r.ents {
		r.ents[i].sgeBuf = sges[i*lim.maxSGE : (i+1)*lim.maxSGE : (i+1)*lim.maxSGE]
	}
}

func (r *recvQueue) at(i uint64) *recvEntry { return &r.ents[i%uint64(len(r.ents))] }
func (r *recvQueue) empty() bool            { return r.head == r.tail }
func (r *recvQueue) full() bool             { return r.tail-r.head == uint64(len(r.ents)) }

// PostRecv posts a chain of receives. It is allowed in QPInit and
// QPReady; in QPError the receives complete at once with StatusFlushed.
func (q *queuePair) PostRecv(wr *verbs.RecvRequest) (*verbs.RecvRequest, error) {
	if q.failPending.Load() {
		q.fail(verbs.StatusFlushed)
	}
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	st := verbs.QPState(q.state.Load())
	if st == verbs.QPClosed {
		return wr, fmt.Errorf("shm: post recv on QP %d: %w", q.num, verbs.ErrClosed)
	}
	for ; wr != nil; wr = wr.Next {
		if len(wr.SGEs) > q.lim.maxSGE {
			return wr, fmt.Errorf("shm: post recv: %d SGEs over %d: %w", len(wr.SGEs), q.lim.maxSGE, verbs.ErrInvalid)
		}
		if st == verbs.QPError {
			q.recvCQ.push(verbs.Completion{ID: wr.ID, QP: q.num, Op: verbs.OpRecv, Status: verbs.StatusFlushed})
			continue
		}
		if q.rq.full() {
			return wr, fmt.Errorf("shm: post recv: %d receives outstanding: %w", len(q.rq.ents), verbs.ErrQueueFull)
		}
		e := q.rq.at(q.rq.tail)
		e.id = wr.ID
		e.sges = e.sgeBuf[:copy(e.sgeBuf, wr.SGEs)]
		q.rq.tail++
		q.rqCount.Add(1)
		if q.rq.waiting && st == verbs.QPReady {
			q.rq.waiting = false
			q.kickNIC()
		}
	}
	return nil, nil
}

// flushRecv completes every posted receive with StatusFlushed.
func (q *queuePair) flushRecv() {
	q.rqMu.Lock()
	for ; !q.rq.empty(); q.rq.head++ {
		e := q.rq.at(q.rq.head)
		q.recvCQ.push(verbs.Completion{ID: e.id, QP: q.num, Op: verbs.OpRecv, Status: verbs.StatusFlushed})
	}
	q.rqCount.Store(0)
	q.rq.waiting = false
	q.rqMu.Unlock()
}

// inbound is the NIC goroutine's private view of the inbound ring.
type inbound struct {
	cons      uint64 // bytes consumed; the shared copy is only ever written
	published uint64 // cons as last published to the peer
	blocked   bool   // the head record waits for a receive
}

// processInbound (the caller holds inMu) matches records in the inbound ring to posted receives,
// in order, completing each receive and acknowledging each record. It
// stops at a record that finds no receive (receiver not ready). Every value
// read from the ring is validated; a violation fails the queue pair.
func (q *queuePair) processInbound() {
	for verbs.QPState(q.state.Load()) == verbs.QPReady {
		p := q.my.prod.Load()
		avail := p - q.in.cons
		if avail == 0 {
			break
		}
		off := q.in.cons % ringSize
		if avail > ringSize || p%recAlign != 0 {
			q.peerViolation()
			return
		}
		length, kind, imm := loadRecordHeader(q.my.ring, off)
		var size uint64
		switch kind {
		case recPad:
			size = ringSize - off
		case recSend, recSendImm:
			if length > MaxMessageSize {
				q.peerViolation()
				return
			}
			size = recordSize(uint64(length))
		case recWriteImm:
			size = recordSize(0)
		case recWrite, recWriteData:
			if length > MaxMessageSize {
				q.peerViolation()
				return
			}
			size = recordSize(writeHeader + uint64(length))
		default:
			q.peerViolation()
			return
		}
		if size > avail || off+size > ringSize {
			q.peerViolation()
			return
		}
		if kind == recPad {
			q.in.cons += size
			continue
		}
		st, consumed := verbs.StatusSuccess, true
		if kind == recWrite {
			st = q.execCarriedWrite(off, length)
		} else {
			st, consumed = q.deliver(off, length, kind, imm)
		}
		if !consumed {
			q.in.blocked = true
			q.inBlocked.Store(true)
			break
		}
		q.in.blocked = false
		q.inBlocked.Store(false)
		if st != verbs.StatusSuccess {
			// The rejection's status goes first: the peer reads it once it
			// sees nack.
			q.my.nackSt.Store(uint32(st))
			q.my.nack.Store(q.in.cons + 1)
			q.publishCons()
			q.fail(verbs.StatusFlushed)
			return
		}
		q.in.cons += size
		// Acknowledge each record at once: the sender completes it and
		// reuses its ring space without waiting for the rest of the batch.
		q.publishCons()
	}
	q.publishCons()
}

// deliver consumes the oldest posted receive for the record at ring
// offset off and completes it; consumed is false when none is posted.
func (q *queuePair) deliver(off uint64, length, kind, imm uint32) (st verbs.Status, consumed bool) {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if q.rq.empty() {
		q.rq.waiting = true
		return verbs.StatusSuccess, false
	}
	if kind == recWriteData {
		// The write goes first; a failed one consumes no receive (the
		// queue pair fails and flushes them all).
		if st := q.execCarriedWrite(off, length); st != verbs.StatusSuccess {
			return st, true
		}
	}
	e := q.rq.at(q.rq.head)
	q.rq.head++
	q.rqCount.Add(-1)
	c := verbs.Completion{ID: e.id, QP: q.num, Op: verbs.OpRecv, ByteLen: length, Imm: imm}
	switch kind {
	case recWriteImm, recWriteData:
		c.Op, c.HasImm = verbs.OpRecvWithImm, true
	case recSendImm:
		c.HasImm = true
		fallthrough
	default:
		var room uint64
		for _, s := range e.sges {
			room += uint64(s.Length)
		}
		if uint64(length) > room {
			c.Status = verbs.StatusLocalLength
		} else {
			c.Status = q.scatterLocal(q.my.ring[off+recHeader:off+recHeader+uint64(length)], e.sges)
		}
	}
	if !c.HasImm {
		c.Imm = 0
	}
	q.recvCQ.push(c)
	return c.Status, true
}

// publishCons acknowledges consumed records to the peer when the consumer
// position moved since it was last published.
func (q *queuePair) publishCons() {
	if q.in.cons != q.in.published {
		q.in.published = q.in.cons
		q.my.cons.Store(q.in.cons)
		q.ringPeer()
	}
}

// execCarriedWrite executes the WRITE carried by the record at ring offset
// off (length data bytes after its write header) into this side's region
// it names. The key, range and rights are checked against this provider's
// regions: the peer reaches only regions of this queue pair's protection
// domain that grant remote write. An aligned 1/2/4/8-byte write is one
// atomic store, as on the direct path.
func (q *queuePair) execCarriedWrite(off uint64, length uint32) verbs.Status {
	body := q.my.ring[off+recHeader : off+recHeader+writeHeader+uint64(length)]
	raddr := binary.LittleEndian.Uint64(body[0:])
	rkey := binary.LittleEndian.Uint32(body[8:])
	src := body[writeHeader:]
	if length == 0 {
		return verbs.StatusSuccess
	}
	r := q.p.regions.lookup(rkey)
	if r == nil || r.access&verbs.AccessRemoteWrite == 0 {
		return verbs.StatusRemoteAccess
	}
	mem := r.acquire()
	if mem == nil {
		return verbs.StatusRemoteAccess
	}
	defer r.release()
	n := uint64(length)
	if raddr > uint64(len(mem)) || n > uint64(len(mem))-raddr {
		return verbs.StatusRemoteAccess
	}
	dst := mem[raddr : raddr+n]
	if smallAligned(n, raddr) {
		storeSmall(dst, src)
	} else {
		copy(dst, src)
	}
	return verbs.StatusSuccess
}

// peerViolation fails the queue pair after the peer broke the ring
// protocol (garbage in shared memory).
func (q *queuePair) peerViolation() {
	q.fail(verbs.StatusRemoteInvalid)
}
