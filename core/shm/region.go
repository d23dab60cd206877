package shm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

const accessAll = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

// region is a registered memfd mapping. Work requests use it between
// acquire and release; Close waits for them and then unmaps.
type region struct {
	p      *Provider
	key    uint32
	access verbs.Access
	size   int    // requested size; the mapping is rounded up to a page
	fd     int    // kept to announce the region to queue pairs created later
	bytes  []byte // the caller's view, mem[:size:size]

	mu  sync.RWMutex
	mem []byte // nil once closed; +checklocks:mu
}

// RegisterRegion allocates size zeroed bytes in a sealed memfd and, when
// access grants remote rights, announces the region to the peer of every
// queue pair of p before returning.
func (p *Provider) RegisterRegion(size int, access verbs.Access) (verbs.Region, error) {
	if size <= 0 || size > verbs.MaxRegionSize || access&^accessAll != 0 {
		return nil, fmt.Errorf("shm: register region of %d bytes, access %#x: %w", size, access, verbs.ErrInvalid)
	}
	fd, mem, err := createSealedMemfd("sdpshim-region", pageRound(size))
	if err != nil {
		return nil, fmt.Errorf("shm: register region: %w", err)
	}
	r := &region{p: p, access: access, size: size, fd: fd, mem: mem, bytes: mem[:size:size]}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		r.unmap()
		return nil, fmt.Errorf("shm: register region: %w", verbs.ErrClosed)
	}
	if err := p.regions.add(r); err != nil {
		r.unmap()
		return nil, err
	}
	if r.remote() {
		for q := range p.qps {
			q.announce(annAdd, r)
		}
	}
	return r, nil
}

func (r *region) Bytes() []byte    { return r.bytes }
func (r *region) LocalKey() uint32 { return r.key }

// Remote returns the key and length the peer uses; Addr is 0 because the
// provider addresses remote memory by offset.
func (r *region) Remote() verbs.RemoteRegion {
	if !r.remote() {
		return verbs.RemoteRegion{}
	}
	return verbs.RemoteRegion{Key: r.key, Addr: 0, Len: uint64(r.size)}
}

func (r *region) remote() bool {
	return r.access&(verbs.AccessRemoteRead|verbs.AccessRemoteWrite) != 0
}

// Close withdraws the region from the peers it was announced to, waits for
// work requests using it and unmaps it.
func (r *region) Close() error {
	p := r.p
	p.mu.Lock()
	if !p.regions.remove(r) {
		p.mu.Unlock()
		return fmt.Errorf("shm: close region %d: %w", r.key, verbs.ErrClosed)
	}
	if r.remote() {
		for q := range p.qps {
			q.announce(annRemove, r)
		}
	}
	p.mu.Unlock()
	r.unmap()
	return nil
}

// unmap waits for users, then releases the mapping and the memfd.
func (r *region) unmap() {
	r.mu.Lock()
	mem := r.mem
	r.mem = nil
	r.mu.Unlock()
	if mem != nil {
		unix.Munmap(mem)
	}
	closeRaw(r.fd)
}

// acquire returns the mapping, read-locked, or nil when closed.
func (r *region) acquire() []byte {
	r.mu.RLock()
	if r.mem == nil {
		r.mu.RUnlock()
		return nil
	}
	return r.mem[:r.size]
}

// release ends a successful acquire.
func (r *region) release() { r.mu.RUnlock() }

// regionTable maps keys to regions. A key is slot | generation<<16, so a
// stale key of a closed region never names the region that reuses its
// slot. Lookups load an immutable snapshot; changes hold Provider.mu.
type regionTable struct {
	slots atomic.Pointer[[]*region]
	gens  []uint16 // per slot; +checklocks:Provider.mu
	free  []uint32 // free slots; +checklocks:Provider.mu
	count int      // +checklocks:Provider.mu
}

const maxRegions = 1<<16 - 1

// lookup returns the region named by key, or nil.
func (t *regionTable) lookup(key uint32) *region {
	s := t.slots.Load()
	if s == nil {
		return nil
	}
	idx := key & 0xffff
	if int(idx) >= len(*s) {
		return nil
	}
	if r := (*s)[idx]; r != nil && r.key == key {
		return r
	}
	return nil
}

// add assigns r a key and publishes it.
func (t *regionTable) add(r *region) error {
	var old []*region
	if s := t.slots.Load(); s != nil {
		old = *s
	} else {
		old = make([]*region, 1) // slot 0 is never used: key 0 means "none"
		t.gens = make([]uint16, 1)
	}
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(old) > maxRegions {
			return fmt.Errorf("shm: more than %d regions: %w", maxRegions, verbs.ErrBusy)
		}
		idx = uint32(len(old))
		t.gens = append(t.gens, 0)
	}
	r.key = uint32(t.gens[idx])<<16 | idx
	next := make([]*region, max(len(old), int(idx)+1))
	copy(next, old)
	next[idx] = r
	t.slots.Store(&next)
	t.count++
	return nil
}

// remove unpublishes r; it reports false when r was not in the table.
func (t *regionTable) remove(r *region) bool {
	if t.lookup(r.key) != r {
		return false
	}
	old := *t.slots.Load()
	next := make([]*region, len(old))
	copy(next, old)
	idx := r.key & 0xffff
	next[idx] = nil
	t.gens[idx]++
	t.free = append(t.free, idx)
	t.slots.Store(&next)
	t.count--
	return true
}

// forEach calls f for every live region; the caller holds Provider.mu.
func (t *regionTable) forEach(f func(*region)) {
	if s := t.slots.Load(); s != nil {
		for _, r := range *s {
			if r != nil {
				f(r)
			}
		}
	}
}
