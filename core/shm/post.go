package shm

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// PostSend posts a chain of send requests. A one-sided request (WRITE,
// READ) that finds the send queue empty and the peer connected runs here,
// on the caller's goroutine, before PostSend returns; any other request is
// queued and runs as soon as everything before it allows (see sendqueue.go).
func (q *queuePair) PostSend(wr *verbs.SendRequest) (*verbs.SendRequest, error) {
	if q.failPending.Load() {
		q.fail(verbs.StatusFlushed)
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	switch verbs.QPState(q.state.Load()) {
	case verbs.QPInit:
		return wr, fmt.Errorf("shm: post send on QP %d: %w", q.num, verbs.ErrNotReady)
	case verbs.QPClosed:
		return wr, fmt.Errorf("shm: post send on QP %d: %w", q.num, verbs.ErrClosed)
	}
	q.checkPeerLocked()
	queued := false
	for ; wr != nil; wr = wr.Next {
		if err := q.validateSend(wr); err != nil {
			if queued {
				q.progressSendLocked()
			}
			return wr, err
		}
		if q.failPending.Load() {
			q.failLocked(verbs.StatusFlushed)
		}
		if verbs.QPState(q.state.Load()) != verbs.QPReady {
			q.sendCQ.push(verbs.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: verbs.StatusFlushed})
			continue
		}
		if q.sq.empty() && q.sq.peerReady && (wr.Op == verbs.OpWrite || wr.Op == verbs.OpRead) {
			q.execNowLocked(wr)
			continue
		}
		if q.sq.full() {
			q.progressSendLocked() // acknowledgements may free entries
			if verbs.QPState(q.state.Load()) != verbs.QPReady {
				q.sendCQ.push(verbs.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: verbs.StatusFlushed})
				continue
			}
		}
		if q.sq.full() {
			return wr, fmt.Errorf("shm: post send: %d requests outstanding: %w", len(q.sq.ents), verbs.ErrQueueFull)
		}
		q.enqueueLocked(wr)
		queued = true
	}
	if queued {
		q.progressSendLocked()
	}
	return nil, nil
}

// checkPeerLocked notices a connected, failed or closed peer and pending
// region announcements before requests run.
func (q *queuePair) checkPeerLocked() {
	if verbs.QPState(q.state.Load()) != verbs.QPReady {
		return
	}
	ps := q.peer.state.Load()
	switch {
	case ps == wireReady:
		q.sq.peerReady = true
	case ps != wireInit || q.sq.peerReady:
		q.progressSendLocked() // fails the queue pair in order
		return
	}
	if q.announcementsPending() {
		q.drainAnnouncements()
	}
}

// validateSend applies the post-time checks of verbs.QueuePair.PostSend.
func (q *queuePair) validateSend(wr *verbs.SendRequest) error {
	switch wr.Op {
	case verbs.OpWrite, verbs.OpWriteWithImm, verbs.OpRead, verbs.OpSend:
	default:
		return fmt.Errorf("shm: post send: opcode %v: %w", wr.Op, verbs.ErrInvalid)
	}
	if len(wr.SGEs) > q.lim.maxSGE {
		return fmt.Errorf("shm: post send: %d SGEs over %d: %w", len(wr.SGEs), q.lim.maxSGE, verbs.ErrInvalid)
	}
	if wr.Flags&verbs.SendInline != 0 {
		if wr.Op == verbs.OpRead {
			return fmt.Errorf("shm: post send: inline READ: %w", verbs.ErrInvalid)
		}
		var total uint64
		for _, s := range wr.SGEs {
			total += uint64(s.Length)
		}
		if total > uint64(q.lim.maxInline) {
			return fmt.Errorf("shm: post send: inline payload %d over %d: %w", total, q.lim.maxInline, verbs.ErrInvalid)
		}
	}
	return nil
}

// execNowLocked runs a one-sided request on the posting goroutine. On
// error the request completes with its status and the queue pair fails.
func (q *queuePair) execNowLocked(wr *verbs.SendRequest) {
	var n uint32
	var st verbs.Status
	if wr.Op == verbs.OpRead {
		n, st = q.execRead(wr.SGEs, wr.RemoteAddr, wr.RemoteKey)
	} else {
		n, st = q.execWrite(wr.SGEs, nil, wr.RemoteAddr, wr.RemoteKey)
	}
	if st != verbs.StatusSuccess {
		q.sendCQ.push(verbs.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: st})
		q.failLocked(verbs.StatusFlushed)
		return
	}
	if wr.Flags&verbs.SendSignaled != 0 {
		q.sendCQ.push(verbs.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, ByteLen: n})
	}
}

// enqueueLocked copies wr into the tail entry. An inline payload is copied
// now; a bad local key found doing so fails the entry when it executes.
func (q *queuePair) enqueueLocked(wr *verbs.SendRequest) {
	e := q.sq.at(q.sq.tail)
	e.id, e.op, e.imm, e.rkey, e.raddr = wr.ID, wr.Op, wr.Imm, wr.RemoteKey, wr.RemoteAddr
	e.signaled = wr.Flags&verbs.SendSignaled != 0
	e.hasImm = wr.HasImm || wr.Op == verbs.OpWriteWithImm
	e.oneSided = wr.Op == verbs.OpWrite || wr.Op == verbs.OpRead
	e.inline = wr.Flags&verbs.SendInline != 0
	e.failed, e.status, e.byteLen = false, verbs.StatusSuccess, 0
	e.sges = e.sgeBuf[:copy(e.sgeBuf, wr.SGEs)]
	if e.inline {
		var total int
		for _, s := range wr.SGEs {
			total += int(s.Length)
		}
		e.stash = e.stash[:total]
		if st := q.gatherLocal(wr.SGEs, e.stash); st != verbs.StatusSuccess {
			e.failed, e.status = true, st
		}
	}
	q.sq.tail++
	q.sqBusy.Store(true)
}
