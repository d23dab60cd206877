package shm

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core"
)

// PostSend posts a chain of send requests. A one-sided request (WRITE,
// READ) that finds the send queue empty and the peer connected runs here,
// on the caller's goroutine, before PostSend returns; any other request is
// queued and runs as soon as everything before it allows (see sendqueue.go).
func (q *queuePair) PostSend(wr *core.SendRequest) (*core.SendRequest, error) {
	if q.failPending.Load() {
		q.fail(core.StatusFlushed)
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	switch core.QPState(q.state.Load()) {
	case core.QPInit:
		return wr, fmt.Errorf("shm: post send on QP %d: %w", q.num, core.ErrNotReady)
	case core.QPClosed:
		return wr, fmt.Errorf("shm: post send on QP %d: %w", q.num, core.ErrClosed)
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
			q.failLocked(core.StatusFlushed)
		}
		if core.QPState(q.state.Load()) != core.QPReady {
			q.sendCQ.push(core.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: core.StatusFlushed})
			continue
		}
		if q.sq.empty() && q.sq.peerReady && (wr.Op == core.OpWrite || wr.Op == core.OpRead) {
			q.execNowLocked(wr)
			continue
		}
		if q.sq.full() {
			q.progressSendLocked() // acknowledgements may free entries
			if core.QPState(q.state.Load()) != core.QPReady {
				q.sendCQ.push(core.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: core.StatusFlushed})
				continue
			}
		}
		if q.sq.full() {
			return wr, fmt.Errorf("shm: post send: %d requests outstanding: %w", len(q.sq.ents), core.ErrQueueFull)
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
	if core.QPState(q.state.Load()) != core.QPReady {
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

// validateSend applies the post-time checks of core.QueuePair.PostSend.
func (q *queuePair) validateSend(wr *core.SendRequest) error {
	switch wr.Op {
	case core.OpWrite, core.OpWriteWithImm, core.OpRead, core.OpSend:
	default:
		return fmt.Errorf("shm: post send: opcode %v: %w", wr.Op, core.ErrInvalid)
	}
	if len(wr.SGEs) > q.lim.maxSGE {
		return fmt.Errorf("shm: post send: %d SGEs over %d: %w", len(wr.SGEs), q.lim.maxSGE, core.ErrInvalid)
	}
	if wr.Flags&core.SendInline != 0 {
		if wr.Op == core.OpRead {
			return fmt.Errorf("shm: post send: inline READ: %w", core.ErrInvalid)
		}
		var total uint64
		for _, s := range wr.SGEs {
			total += uint64(s.Length)
		}
		if total > uint64(q.lim.maxInline) {
			return fmt.Errorf("shm: post send: inline payload %d over %d: %w", total, q.lim.maxInline, core.ErrInvalid)
		}
	}
	return nil
}

// execNowLocked runs a one-sided request on the posting goroutine. On
// error the request completes with its status and the queue pair fails.
func (q *queuePair) execNowLocked(wr *core.SendRequest) {
	var n uint32
	var st core.Status
	if wr.Op == core.OpRead {
		n, st = q.execRead(wr.SGEs, wr.RemoteAddr, wr.RemoteKey)
	} else {
		n, st = q.execWrite(wr.SGEs, nil, wr.RemoteAddr, wr.RemoteKey)
	}
	if st != core.StatusSuccess {
		q.sendCQ.push(core.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, Status: st})
		q.failLocked(core.StatusFlushed)
		return
	}
	if wr.Flags&core.SendSignaled != 0 {
		q.sendCQ.push(core.Completion{ID: wr.ID, QP: q.num, Op: wr.Op, ByteLen: n})
	}
}

// enqueueLocked copies wr into the tail entry. An inline payload is copied
// now; a bad local key found doing so fails the entry when it executes.
func (q *queuePair) enqueueLocked(wr *core.SendRequest) {
	e := q.sq.at(q.sq.tail)
	e.id, e.op, e.imm, e.rkey, e.raddr = wr.ID, wr.Op, wr.Imm, wr.RemoteKey, wr.RemoteAddr
	e.signaled = wr.Flags&core.SendSignaled != 0
	e.hasImm = wr.HasImm || wr.Op == core.OpWriteWithImm
	e.oneSided = wr.Op == core.OpWrite || wr.Op == core.OpRead
	e.inline = wr.Flags&core.SendInline != 0
	e.failed, e.status, e.byteLen = false, core.StatusSuccess, 0
	e.sges = e.sgeBuf[:copy(e.sgeBuf, wr.SGEs)]
	if e.inline {
		var total int
		for _, s := range wr.SGEs {
			total += int(s.Length)
		}
		e.stash = e.stash[:total]
		if st := q.gatherLocal(wr.SGEs, e.stash); st != core.StatusSuccess {
			e.failed, e.status = true, st
		}
	}
	q.sq.tail++
	q.sqBusy.Store(true)
}
