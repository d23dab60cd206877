//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// queuePair is an RC queue pair with the C memory its posts are built in.
//
// Lifecycle (state, under both sqMu and rqMu to change): QPInit until
// Connect, QPReady after it (the device's own state, read by State, may
// be ERR by then), QPClosed after Close. Close moves the device queue pair
// to ERR, which flushes outstanding work as completions; it is destroyed
// (ibv_destroy_qp) once those are polled, or when a completion queue it
// uses closes, because destroying it earlier would discard them.
type queuePair struct {
	p        *Provider
	qp       *C.struct_ibv_qp
	num      uint32
	psn      uint32
	scq, rcq *completionQueue
	lim      limits

	state     atomic.Uint32 // verbs.QPInit, verbs.QPReady or verbs.QPClosed
	closing   atomic.Bool   // Close moved it to ERR; destroy when idle
	destroyed atomic.Bool
	lifeMu    sync.RWMutex // held shared around verbs calls on qp outside the posting paths; exclusively to destroy

	sqMu sync.Mutex
	sq   workRing             // +checklocks:sqMu
	sreq cArray[wireSend]     // maxSend requests; +checklocks:sqMu
	ssge cArray[wireSGE]      // maxSend*maxSGE; +checklocks:sqMu
	swr  unsafe.Pointer       // maxSend struct ibv_send_wr; +checklocks:sqMu
	sgo  []*verbs.SendRequest // the caller's request of each built entry; +checklocks:sqMu

	rqMu sync.Mutex
	rq   workRing             // +checklocks:rqMu
	rreq cArray[wireRecv]     // +checklocks:rqMu
	rsge cArray[wireSGE]      // +checklocks:rqMu
	rwr  unsafe.Pointer       // +checklocks:rqMu
	rgo  []*verbs.RecvRequest // +checklocks:rqMu
}

// CreateQP creates an RC queue pair and moves it to INIT (ibv_create_qp +
// ibv_modify_qp). QPConfig zero values mean 128 sends, 128 receives, 64
// inline bytes and 1 SGE.
func (p *Provider) CreateQP(cfg verbs.QPConfig) (verbs.QueuePair, error) {
	scq, ok1 := cfg.SendCQ.(*completionQueue)
	rcq, ok2 := cfg.RecvCQ.(*completionQueue)
	if !ok1 || !ok2 || scq == nil || rcq == nil || scq.p != p || rcq.p != p {
		return nil, fmt.Errorf("rdma: create QP: completion queues of another provider or nil: %w", verbs.ErrInvalid)
	}
	lim, err := limitsOf(cfg, p.caps)
	if err != nil {
		return nil, err
	}
	q := &queuePair{p: p, scq: scq, rcq: rcq, lim: lim, psn: newPSN(),
		sq: newWorkRing(lim.maxSend), rq: newWorkRing(lim.maxRecv),
		sgo: make([]*verbs.SendRequest, lim.maxSend), rgo: make([]*verbs.RecvRequest, lim.maxRecv)}
	if err := q.allocBuffers(); err != nil {
		q.freeBuffers()
		return nil, err
	}
	// A completion queue closed meanwhile makes attach fail below.
	c, errno := C.sdp_create_qp(p.pd, scq.cq, rcq.cq, C.uint32_t(lim.maxSend), C.uint32_t(lim.maxRecv),
		C.uint32_t(lim.maxSGE), C.uint32_t(lim.maxInline))
	if c == nil {
		q.freeBuffers()
		if errno == unix.EINVAL {
			errno = fmt.Errorf("%v (limits beyond the device's?): %w", errno, verbs.ErrInvalid)
		}
		return nil, fmt.Errorf("rdma: create QP: ibv_create_qp: %w", errno)
	}
	q.qp, q.num = c, uint32(c.qp_num)
	if rc := C.sdp_qp_to_init(c, C.uint8_t(p.port.num)); rc != 0 {
		q.release()
		return nil, fmt.Errorf("rdma: create QP: modify to INIT: %v", errnoOf(rc))
	}
	q.state.Store(uint32(verbs.QPInit))
	if !scq.attach(q) {
		q.release()
		return nil, fmt.Errorf("rdma: create QP: send CQ closed: %w", verbs.ErrClosed)
	}
	if !rcq.attach(q) {
		scq.detach(q)
		q.release()
		return nil, fmt.Errorf("rdma: create QP: recv CQ closed: %w", verbs.ErrClosed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		scq.detach(q)
		rcq.detach(q)
		q.release()
		return nil, fmt.Errorf("rdma: create QP: %w", verbs.ErrClosed)
	}
	p.qps[q] = struct{}{}
	return q, nil
}

func (q *queuePair) allocBuffers() error {
	var err error
	l := q.lim
	if q.sreq, err = newCArray[wireSend](l.maxSend); err != nil {
		return err
	}
	if q.ssge, err = newCArray[wireSGE](l.maxSend * l.maxSGE); err != nil {
		return err
	}
	if q.swr, err = callocBytes(l.maxSend, C.sizeof_struct_ibv_send_wr); err != nil {
		return err
	}
	if q.rreq, err = newCArray[wireRecv](l.maxRecv); err != nil {
		return err
	}
	if q.rsge, err = newCArray[wireSGE](l.maxRecv * l.maxSGE); err != nil {
		return err
	}
	q.rwr, err = callocBytes(l.maxRecv, C.sizeof_struct_ibv_recv_wr)
	return err
}

func (q *queuePair) freeBuffers() {
	q.sreq.free()
	q.ssge.free()
	cfree(q.swr)
	q.rreq.free()
	q.rsge.free()
	cfree(q.rwr)
	q.swr, q.rwr = nil, nil
}

// release destroys a queue pair that was never published.
func (q *queuePair) release() {
	C.ibv_destroy_qp(q.qp)
	q.freeBuffers()
}

// Number returns the queue pair number (ibv_qp.qp_num).
func (q *queuePair) Number() uint32 { return q.num }

// State returns the device's state of the queue pair (ibv_query_qp).
func (q *queuePair) State() verbs.QPState {
	q.lifeMu.RLock()
	defer q.lifeMu.RUnlock()
	if verbs.QPState(q.state.Load()) == verbs.QPClosed || q.destroyed.Load() {
		return verbs.QPClosed
	}
	s := int(C.sdp_qp_state(q.qp))
	if s < 0 {
		return verbs.QPError
	}
	return qpStateOf(s)
}

// LocalEndpoint describes the queue pair for the peer's Connect; it
// carries no files.
func (q *queuePair) LocalEndpoint() (verbs.Endpoint, error) {
	if verbs.QPState(q.state.Load()) == verbs.QPClosed {
		return verbs.Endpoint{}, fmt.Errorf("rdma: local endpoint of QP %d: %w", q.num, verbs.ErrClosed)
	}
	pa := q.p.port
	e := endpointInfo{QPNum: q.num, PSN: q.psn, Port: pa.num, LID: pa.lid, GID: pa.gid,
		MTU: pa.mtu, RdAtomic: uint8(q.p.rdAtomic), Global: pa.global}
	return verbs.Endpoint{Data: e.encode()}, nil
}

// Connect moves the queue pair INIT -> RTR -> RTS toward the peer remote
// describes (ibv_modify_qp). The endpoint carries no files; any that come
// with it are closed.
func (q *queuePair) Connect(remote verbs.Endpoint) error {
	for _, fd := range remote.Files {
		unix.Close(fd)
	}
	peer, err := decodeEndpoint(remote.Data)
	if err != nil {
		return err
	}
	pa := q.p.port
	if peer.Global != pa.global {
		return fmt.Errorf("rdma: connect QP %d: peer link needs global routing %v, this port %v (RoCE and InfiniBand do not mix): %w",
			q.num, peer.Global, pa.global, verbs.ErrInvalid)
	}
	q.sqMu.Lock()
	defer q.sqMu.Unlock()
	switch verbs.QPState(q.state.Load()) {
	case verbs.QPClosed:
		return fmt.Errorf("rdma: connect QP %d: %w", q.num, verbs.ErrClosed)
	case verbs.QPReady:
		return fmt.Errorf("rdma: connect QP %d: already connected: %w", q.num, verbs.ErrInvalid)
	}
	path := C.struct_sdp_path{
		dest_qpn:           C.uint32_t(peer.QPNum),
		rq_psn:             C.uint32_t(peer.PSN),
		sq_psn:             C.uint32_t(q.psn),
		dlid:               C.uint16_t(peer.LID),
		port:               C.uint8_t(pa.num),
		mtu:                C.uint8_t(min(pa.mtu, peer.MTU)),
		min_rnr_timer:      C.uint8_t(q.p.opts.MinRNRTimer),
		timeout:            C.uint8_t(q.p.opts.RetryTimeout),
		max_dest_rd_atomic: C.uint8_t(q.p.rdAtomic),
		max_rd_atomic:      C.uint8_t(min(q.p.initRdAtomic, int(peer.RdAtomic))),
	}
	if peer.Global {
		path.global = 1
		path.sgid_index = C.uint8_t(q.p.opts.GIDIndex)
		for i, b := range peer.GID {
			path.dgid[i] = C.uint8_t(b)
		}
	}
	r := C.sdp_qp_connect(q.qp, path)
	if r.rc != 0 {
		stage := "RTR"
		if r.stage == C.IBV_QPS_RTS {
			stage = "RTS"
		}
		return fmt.Errorf("rdma: connect QP %d to QP %d: modify to %s: %v", q.num, peer.QPNum, stage, errnoOf(r.rc))
	}
	q.rqMu.Lock()
	q.state.Store(uint32(verbs.QPReady))
	q.rqMu.Unlock()
	return nil
}

// Close moves the queue pair to ERR, so outstanding work completes with
// StatusFlushed, and destroys it once that work is polled.
func (q *queuePair) Close() error {
	q.sqMu.Lock()
	q.rqMu.Lock()
	if verbs.QPState(q.state.Load()) == verbs.QPClosed {
		q.rqMu.Unlock()
		q.sqMu.Unlock()
		return fmt.Errorf("rdma: close QP %d: %w", q.num, verbs.ErrClosed)
	}
	q.state.Store(uint32(verbs.QPClosed))
	q.rqMu.Unlock()
	q.sqMu.Unlock()
	rc := C.sdp_qp_to_error(q.qp)
	q.closing.Store(true)
	if rc != 0 {
		q.destroy() // no flush is coming
		return fmt.Errorf("rdma: close QP %d: modify to ERR: %v", q.num, errnoOf(rc))
	}
	q.destroyIfIdle()
	return nil
}

// destroyIfIdle destroys a closed queue pair whose work has all completed.
func (q *queuePair) destroyIfIdle() {
	if !q.closing.Load() {
		return
	}
	q.sqMu.Lock()
	n := q.sq.outstanding()
	q.sqMu.Unlock()
	q.rqMu.Lock()
	n += q.rq.outstanding()
	q.rqMu.Unlock()
	if n == 0 {
		q.destroy()
	}
}

// destroy destroys the device queue pair (once) and forgets it.
func (q *queuePair) destroy() {
	if !q.destroyed.CompareAndSwap(false, true) {
		return
	}
	q.lifeMu.Lock()
	C.ibv_destroy_qp(q.qp)
	q.lifeMu.Unlock()
	q.sqMu.Lock()
	q.rqMu.Lock()
	q.freeBuffers()
	q.rqMu.Unlock()
	q.sqMu.Unlock()
	q.scq.detach(q)
	q.rcq.detach(q)
	q.p.mu.Lock()
	delete(q.p.qps, q)
	q.p.mu.Unlock()
}

// complete turns a device completion of this queue pair into a
// verbs.Completion, retiring its request and the unsignaled ones before
// it. false: the completion names no outstanding request.
func (q *queuePair) complete(w *wireCompletion) (verbs.Completion, bool) {
	if w.ID&recvTag != 0 {
		q.rqMu.Lock()
		s, ok := q.rq.complete(w.ID &^ recvTag)
		q.rqMu.Unlock()
		return completionOf(w, s, true), ok
	}
	q.sqMu.Lock()
	s, ok := q.sq.complete(w.ID)
	q.sqMu.Unlock()
	return completionOf(w, s, false), ok
}
