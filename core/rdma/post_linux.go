//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// PostSend checks and translates the chain into the queue pair's C
// buffers, then posts it with one ibv_post_send. Nothing is allocated.
func (q *queuePair) PostSend(wr *verbs.SendRequest) (*verbs.SendRequest, error) {
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	switch verbs.QPState(q.state.Load()) {
	case verbs.QPInit:
		return wr, fmt.Errorf("rdma: post send on QP %d: %w", q.num, verbs.ErrNotReady)
	case verbs.QPClosed:
		return wr, fmt.Errorf("rdma: post send on QP %d: %w", q.num, verbs.ErrClosed)
	}
	regions := q.p.regions.load()
	inlineLocked := false
	n := 0
	var bad *verbs.SendRequest
	var err error
	for ; wr != nil; wr = wr.Next {
		if q.sq.free() == 0 {
			bad, err = wr, fmt.Errorf("rdma: post send on QP %d: %d requests outstanding: %w", q.num, q.lim.maxSend, verbs.ErrQueueFull)
			break
		}
		if wr.Flags&verbs.SendInline != 0 && !inlineLocked {
			// From here until the post returns, no region can be unmapped
			// (the library copies inline payloads from region memory).
			q.p.inlineMu.RLock()
			inlineLocked = true
			regions = q.p.regions.load()
		}
		first := n * q.lim.maxSGE
		hint, terr := translateSend(wr, q.lim, regions, q.sq.tail, &q.sreq.s[n],
			q.ssge.s[first:first+q.lim.maxSGE], uint32(first))
		if terr != nil {
			bad, err = wr, terr
			break
		}
		q.sq.push(ringSlot{id: wr.ID, op: wr.Op, hint: hint})
		q.sgo[n] = wr
		n++
	}
	if n > 0 {
		r := C.sdp_post_send(q.qp, swrPtr(q.sreq), C.int(n), sgePtr(q.ssge), sendWRPtr(q.swr))
		if r.rc != 0 {
			i := min(max(int(r.bad), 0), n-1)
			q.sq.unpush(n - i)
			bad = q.sgo[i]
			err = fmt.Errorf("rdma: post send on QP %d: ibv_post_send: %w", q.num, postErrorOf(unix.Errno(r.rc)))
		}
	}
	if inlineLocked {
		q.p.inlineMu.RUnlock()
	}
	clear(q.sgo[:n])
	return bad, err
}

// PostRecv is PostSend for receive requests (ibv_post_recv); receives may
// be posted before Connect.
func (q *queuePair) PostRecv(wr *verbs.RecvRequest) (*verbs.RecvRequest, error) {
	q.rqMu.Lock()
	defer q.rqMu.Unlock()
	if verbs.QPState(q.state.Load()) == verbs.QPClosed {
		return wr, fmt.Errorf("rdma: post recv on QP %d: %w", q.num, verbs.ErrClosed)
	}
	regions := q.p.regions.load()
	n := 0
	var bad *verbs.RecvRequest
	var err error
	for ; wr != nil; wr = wr.Next {
		if q.rq.free() == 0 {
			bad, err = wr, fmt.Errorf("rdma: post recv on QP %d: %d requests outstanding: %w", q.num, q.lim.maxRecv, verbs.ErrQueueFull)
			break
		}
		first := n * q.lim.maxSGE
		hint, terr := translateRecv(wr, q.lim, regions, q.rq.tail, &q.rreq.s[n],
			q.rsge.s[first:first+q.lim.maxSGE], uint32(first))
		if terr != nil {
			bad, err = wr, terr
			break
		}
		q.rq.push(ringSlot{id: wr.ID, op: verbs.OpRecv, hint: hint})
		q.rgo[n] = wr
		n++
	}
	if n > 0 {
		r := C.sdp_post_recv(q.qp, rwrPtr(q.rreq), C.int(n), sgePtr(q.rsge), recvWRPtr(q.rwr))
		if r.rc != 0 {
			i := min(max(int(r.bad), 0), n-1)
			q.rq.unpush(n - i)
			bad = q.rgo[i]
			err = fmt.Errorf("rdma: post recv on QP %d: ibv_post_recv: %w", q.num, postErrorOf(unix.Errno(r.rc)))
		}
	}
	clear(q.rgo[:n])
	return bad, err
}
