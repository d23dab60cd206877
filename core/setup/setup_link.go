package setup

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Link is one side's connection to a peer as Establish made it: two
// connected queue pairs and their completion queues. Data carries the
// transport's one-sided work (WRITE, READ) and nothing else, so that a
// provider that executes one-sided requests at post time (shm) always
// can: they never queue behind a two-sided request. Bell carries the
// doorbell's WRITE_WITH_IMM rings and holds its posted receives.
//
// Post through PostData and PostBell, which keep the send queues from
// overflowing; the queue pairs are exposed for state queries and for
// tests. Safe for concurrent use.
type Link struct {
	Data       verbs.QueuePair
	Bell       verbs.QueuePair
	DataCQ     verbs.CompletionQueue // send (and unused receive) completions of Data
	BellSendCQ verbs.CompletionQueue
	BellRecvCQ verbs.CompletionQueue // the doorbell's: one goroutine polls it at a time

	// Initiator is true on exactly one side (the one whose random nonce
	// was larger), so the two sides can split id spaces without talking.
	Initiator bool
	// PeerProvider is the provider name the peer reported.
	PeerProvider string

	// MaxInline is the inline limit both queue pairs were created with.
	MaxInline int

	data, bell postQueue
	rings      int // receives the doorbell queue pair holds

	closeOnce sync.Once
	closeErr  error
}

// newLink creates the queue pairs and completion queues of cfg.
func newLink(p verbs.Provider, cfg SetupConfig) (l *Link, err error) {
	l = &Link{MaxInline: cfg.MaxInline, rings: cfg.MaxRings}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	cq := func(depth int) (verbs.CompletionQueue, error) {
		c, err := p.CreateCQ(depth)
		if err != nil {
			return nil, fmt.Errorf("setup: create CQ: %w", err)
		}
		return c, nil
	}
	if l.DataCQ, err = cq(cfg.MaxSend + 16); err != nil {
		return l, err
	}
	if l.BellSendCQ, err = cq(cfg.MaxRings + 16); err != nil {
		return l, err
	}
	if l.BellRecvCQ, err = cq(cfg.MaxRings + 16); err != nil {
		return l, err
	}
	if l.Data, err = p.CreateQP(verbs.QPConfig{
		SendCQ: l.DataCQ, RecvCQ: l.DataCQ,
		MaxSend: cfg.MaxSend, MaxRecv: 1, MaxInline: cfg.MaxInline, MaxSGE: 2,
	}); err != nil {
		return l, fmt.Errorf("setup: create data QP: %w", err)
	}
	if l.Bell, err = p.CreateQP(verbs.QPConfig{
		SendCQ: l.BellSendCQ, RecvCQ: l.BellRecvCQ,
		MaxSend: cfg.MaxRings, MaxRecv: cfg.MaxRings, MaxInline: cfg.MaxInline, MaxSGE: 1,
	}); err != nil {
		return l, fmt.Errorf("setup: create doorbell QP: %w", err)
	}
	l.data.init(l.Data, l.DataCQ, cfg.MaxSend)
	l.bell.init(l.Bell, l.BellSendCQ, cfg.MaxRings)
	return l, nil
}

// PostData posts a chain of one-sided requests on the data queue pair. It
// overwrites each request's ID and SendSignaled flag (it signals as
// needed to reap the queue). With visible it returns only once the whole
// chain completed, so its effects are visible at the peer (on shm that is
// at once: one-sided requests run at post time). It returns the link's
// error once a request failed: that error is final.
func (l *Link) PostData(wr *verbs.SendRequest, visible bool) error {
	return l.data.post(wr, visible, 0)
}

// PostBell posts a chain on the doorbell queue pair without waiting for
// its completion. When the send queue stays full for RingStall it
// returns an error wrapping ErrQueueFull: rings pile up only when the
// peer takes none (a peer that posts no receives).
func (l *Link) PostBell(wr *verbs.SendRequest) error { return l.bell.post(wr, false, RingStall) }

// RingStall bounds how long PostBell waits for room in the doorbell send
// queue.
const RingStall = 5 * time.Second

// Err returns the error that ended the link, or nil while it works: a
// failed request, or a queue pair found in QPError.
func (l *Link) Err() error {
	if err := l.data.failed(); err != nil {
		return err
	}
	if err := l.bell.failed(); err != nil {
		return err
	}
	for _, qp := range []verbs.QueuePair{l.Data, l.Bell} {
		switch qp.State() {
		case verbs.QPError:
			return fmt.Errorf("queue pair %d in error state: %w", qp.Number(), wire.ErrPeerGone)
		case verbs.QPClosed:
			return fmt.Errorf("link: %w", verbs.ErrClosed)
		}
	}
	return nil
}

// Close destroys the queue pairs, then the completion queues. The peer's
// queue pairs move to QPError. Safe to call more than once.
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		for _, qp := range []verbs.QueuePair{l.Data, l.Bell} {
			if qp != nil {
				errs = append(errs, qp.Close())
			}
		}
		l.data.close()
		l.bell.close()
		for _, cq := range []verbs.CompletionQueue{l.DataCQ, l.BellSendCQ, l.BellRecvCQ} {
			if cq != nil {
				errs = append(errs, cq.Close())
			}
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// CompletionError maps a failed completion to the link's error: ErrInvalid
// for a local length or protection fault, ErrPeerGone otherwise.
func CompletionError(c verbs.Completion) error {
	switch c.Status {
	case verbs.StatusLocalLength, verbs.StatusLocalProtection:
		return fmt.Errorf("%v request failed: %v: %w", c.Op, c.Status, verbs.ErrInvalid)
	default:
		return fmt.Errorf("%v request failed: %v: %w", c.Op, c.Status, wire.ErrPeerGone)
	}
}

// Rings returns how many receives the Link's doorbell queue pair holds.
func (l *Link) Rings() int { return l.rings }
