package rdma

import (
	"sync"
	"sync/atomic"
)

// regionTable is a provider's registered regions by local key. Posting
// reads the current regionSet without a lock; registration and
// deregistration (rare) copy it under mu and publish the copy.
type regionTable struct {
	cur atomic.Pointer[regionSet]

	mu sync.Mutex // serialises writers
}

// load returns the current set; never nil.
func (t *regionTable) load() regionSet {
	if s := t.cur.Load(); s != nil {
		return *s
	}
	return nil
}

// add publishes key -> r.
func (t *regionTable) add(key uint32, r regionInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.load()
	next := make(regionSet, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = r
	t.cur.Store(&next)
}

// remove withdraws key.
func (t *regionTable) remove(key uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.load()
	next := make(regionSet, len(old))
	for k, v := range old {
		if k != key {
			next[k] = v
		}
	}
	t.cur.Store(&next)
}

// count returns how many regions are registered.
func (t *regionTable) count() int { return len(t.load()) }
