//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

const accessAll = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead

// region is an anonymous shared mapping registered as one memory region.
// MAP_SHARED: a fork never turns the registered pages copy-on-write in
// the parent, whatever the kernel (see initForkSafety for the rest).
type region struct {
	p      *Provider
	mr     *C.struct_ibv_mr
	mem    []byte // the whole mapping, page-rounded
	bytes  []byte // mem[:size:size]
	lkey   uint32
	remote verbs.RemoteRegion
	closed atomic.Bool
}

// RegisterRegion maps size zeroed bytes and registers exactly those bytes
// (mmap + ibv_reg_mr), so the device refuses any access past size.
func (p *Provider) RegisterRegion(size int, access verbs.Access) (verbs.Region, error) {
	if size <= 0 || size > verbs.MaxRegionSize || access&^accessAll != 0 {
		return nil, fmt.Errorf("rdma: register region of %d bytes, access %#x: %w", size, access, verbs.ErrInvalid)
	}
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (size+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("rdma: register region: mmap %d bytes: %w", size, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		unix.Munmap(mem)
		return nil, fmt.Errorf("rdma: register region: %w", verbs.ErrClosed)
	}
	mr, errno := C.ibv_reg_mr(p.pd, regionBase(mem), C.size_t(size), C.int(accessOf(access)))
	if mr == nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("rdma: register region: ibv_reg_mr %d bytes: %v", size, errno)
	}
	r := &region{p: p, mr: mr, mem: mem, bytes: mem[:size:size], lkey: uint32(mr.lkey)}
	base := uint64(uintptr(regionBase(mem)))
	if access&(verbs.AccessRemoteRead|verbs.AccessRemoteWrite) != 0 {
		r.remote = verbs.RemoteRegion{Key: uint32(mr.rkey), Addr: base, Len: uint64(size)}
	}
	p.regions.add(r.lkey, regionInfo{base: base, size: uint64(size)})
	return r, nil
}

func (r *region) Bytes() []byte              { return r.bytes }
func (r *region) LocalKey() uint32           { return r.lkey }
func (r *region) Remote() verbs.RemoteRegion { return r.remote }

// Close deregisters and unmaps the region (ibv_dereg_mr + munmap). It
// waits for inline posts in progress, which read region memory.
func (r *region) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("rdma: close region: %w", verbs.ErrClosed)
	}
	p := r.p
	p.inlineMu.Lock()
	defer p.inlineMu.Unlock()
	p.regions.remove(r.lkey)
	rc := C.ibv_dereg_mr(r.mr)
	unix.Munmap(r.mem)
	if rc != 0 {
		return fmt.Errorf("rdma: close region: ibv_dereg_mr: %v", errnoOf(rc))
	}
	return nil
}
