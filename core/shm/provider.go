package shm

import (
	"fmt"
	"sync"

	"github.com/sdpshim/sdpshim/core/verbs"
)

var (
	_ verbs.Provider        = (*Provider)(nil)
	_ verbs.Region          = (*region)(nil)
	_ verbs.CompletionQueue = (*completionQueue)(nil)
	_ verbs.QueuePair       = (*queuePair)(nil)
)

// Provider is the shm device: it hands out regions, completion queues and
// queue pairs that work together. It is safe for concurrent use.
type Provider struct {
	regions regionTable // lookups are lock-free; changes hold mu

	mu      sync.Mutex
	closed  bool                     // +checklocks:mu
	qps     map[*queuePair]struct{}  // live queue pairs; +checklocks:mu
	cqs     map[*completionQueue]int // live completion queues; +checklocks:mu
	nextQPN uint32                   // +checklocks:mu
}

// Open opens a shm provider. It holds no operating-system resources until
// objects are created from it.
func Open() (*Provider, error) {
	return &Provider{
		qps: make(map[*queuePair]struct{}),
		cqs: make(map[*completionQueue]int),
	}, nil
}

// Name returns "shm".
func (p *Provider) Name() string { return "shm" }

// Close releases the provider; it returns ErrBusy while regions, queues or
// queue pairs created from it are open.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("shm: close provider: %w", verbs.ErrClosed)
	}
	if n := p.regions.count + len(p.qps) + len(p.cqs); n > 0 {
		return fmt.Errorf("shm: close provider: %d objects open: %w", n, verbs.ErrBusy)
	}
	p.closed = true
	return nil
}

// CreateCQ creates a completion queue of depth entries (1 to 1<<20).
func (p *Provider) CreateCQ(depth int) (verbs.CompletionQueue, error) {
	if depth <= 0 || depth > maxCQDepth {
		return nil, fmt.Errorf("shm: CQ depth %d not in 1..%d: %w", depth, maxCQDepth, verbs.ErrInvalid)
	}
	cq, err := newCompletionQueue(p, depth)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		cq.release()
		return nil, fmt.Errorf("shm: create CQ: %w", verbs.ErrClosed)
	}
	p.cqs[cq] = depth
	return cq, nil
}

// CreateQP creates a queue pair in QPInit; see the package documentation
// for the QPConfig defaults and limits.
func (p *Provider) CreateQP(cfg verbs.QPConfig) (verbs.QueuePair, error) {
	scq, ok1 := cfg.SendCQ.(*completionQueue)
	rcq, ok2 := cfg.RecvCQ.(*completionQueue)
	if !ok1 || !ok2 || scq == nil || rcq == nil || scq.p != p || rcq.p != p {
		return nil, fmt.Errorf("shm: create QP: completion queues of another provider or nil: %w", verbs.ErrInvalid)
	}
	lim, err := limitsOf(cfg)
	if err != nil {
		return nil, err
	}
	q, err := newQueuePair(p, scq, rcq, lim)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed || !scq.attach(q) {
		p.mu.Unlock()
		q.release()
		return nil, fmt.Errorf("shm: create QP: provider or CQ closed: %w", verbs.ErrClosed)
	}
	if rcq != scq && !rcq.attach(q) {
		scq.detach(q)
		p.mu.Unlock()
		q.release()
		return nil, fmt.Errorf("shm: create QP: CQ closed: %w", verbs.ErrClosed)
	}
	p.nextQPN++
	q.num = p.nextQPN
	p.qps[q] = struct{}{}
	// Regions registered before the queue pair existed are announced now,
	// under mu, so none is missed or announced twice.
	p.regions.forEach(func(r *region) {
		if r.remote() {
			q.announce(annAdd, r)
		}
	})
	p.mu.Unlock()
	q.finishCreate()
	return q, nil
}

// forgetQP removes a closing queue pair so that it gets no more
// announcements.
func (p *Provider) forgetQP(q *queuePair) {
	p.mu.Lock()
	delete(p.qps, q)
	p.mu.Unlock()
}

// forgetCQ removes a closed completion queue.
func (p *Provider) forgetCQ(cq *completionQueue) {
	p.mu.Lock()
	delete(p.cqs, cq)
	p.mu.Unlock()
}

// qpLimits are a queue pair's normalised QPConfig limits.
type qpLimits struct {
	maxSend, maxRecv, maxInline, maxSGE int
}

const (
	maxCQDepth     = 1 << 20
	maxWorkQueue   = 8192
	maxInlineLimit = 1024
	maxSGELimit    = 16
)

// limitsOf applies the defaults and bounds documented in the package.
func limitsOf(cfg verbs.QPConfig) (qpLimits, error) {
	l := qpLimits{cfg.MaxSend, cfg.MaxRecv, cfg.MaxInline, cfg.MaxSGE}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.maxSend, 128)
	def(&l.maxRecv, 128)
	def(&l.maxInline, 64)
	def(&l.maxSGE, 1)
	if l.maxSend < 0 || l.maxSend > maxWorkQueue || l.maxRecv < 0 || l.maxRecv > maxWorkQueue ||
		l.maxInline < 0 || l.maxInline > maxInlineLimit || l.maxSGE < 0 || l.maxSGE > maxSGELimit {
		return l, fmt.Errorf("shm: QP limits send %d recv %d inline %d sge %d over %d/%d/%d/%d: %w",
			cfg.MaxSend, cfg.MaxRecv, cfg.MaxInline, cfg.MaxSGE,
			maxWorkQueue, maxWorkQueue, maxInlineLimit, maxSGELimit, verbs.ErrInvalid)
	}
	return l, nil
}
