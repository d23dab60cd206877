//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

var (
	_ verbs.Provider        = (*Provider)(nil)
	_ verbs.Region          = (*region)(nil)
	_ verbs.CompletionQueue = (*completionQueue)(nil)
	_ verbs.QueuePair       = (*queuePair)(nil)
)

// Provider is one verbs device context with one protection domain. It is
// safe for concurrent use.
type Provider struct {
	opts Options
	name string // device name, for messages
	ctx  *C.struct_ibv_context
	pd   *C.struct_ibv_pd
	port portAttrs
	caps deviceCaps
	// maxCQE and the READ depths come from ibv_query_device.
	maxCQE, rdAtomic, initRdAtomic int

	regions regionTable
	// inlineMu is held shared while an inline request is posted (the
	// library copies from region memory then) and exclusively while a
	// region is unmapped.
	inlineMu sync.RWMutex

	events *asyncEvents

	mu     sync.Mutex
	closed bool                                  // +checklocks:mu
	cqs    map[*C.struct_ibv_cq]*completionQueue // +checklocks:mu
	qps    map[*queuePair]struct{}               // not yet destroyed, closed or not; +checklocks:mu
}

// portAttrs are the chosen port's addressing facts.
type portAttrs struct {
	num    uint8
	lid    uint16
	mtu    uint8 // active MTU, enum ibv_mtu
	gid    [16]byte
	global bool // Ethernet link layer (RoCE): every packet carries a GRH
}

// Open opens the device and port opts select (ibv_get_device_list,
// ibv_open_device, ibv_query_port, ibv_alloc_pd). With no usable device
// it returns an error wrapping verbs.ErrNotSupported that says why.
func Open(opts Options) (*Provider, error) {
	opts, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	forkOnce.Do(initForkSafety)
	var n C.int
	list, errno := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("rdma: no RDMA device: ibv_get_device_list: %v: %w", noDeviceReason(errno), verbs.ErrNotSupported)
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))

	facts := make([]deviceFacts, len(devs))
	ctxs := make([]*C.struct_ibv_context, len(devs))
	defer func() {
		for _, c := range ctxs {
			if c != nil {
				C.ibv_close_device(c)
			}
		}
	}()
	for i, d := range devs {
		facts[i].name = C.GoString(C.ibv_get_device_name(d))
		if opts.Device != "" && facts[i].name != opts.Device {
			continue
		}
		ctxs[i], facts[i].ports, facts[i].err = probeDevice(d)
	}
	di, port, err := chooseDevice(facts, opts)
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: opts, name: facts[di].name, ctx: ctxs[di]}
	ctxs[di] = nil // p owns it now
	if err := p.init(uint8(port)); err != nil {
		C.ibv_close_device(p.ctx)
		return nil, err
	}
	return p, nil
}

var forkOnce sync.Once

// initForkSafety makes registered memory survive fork in the parent
// (ibv_fork_init: MADV_DONTFORK on pinned ranges, including the queue
// buffers the library allocates), unless the kernel already keeps pinned
// pages out of copy-on-write (IBV_FORK_UNNEEDED, Linux 5.13+). It must
// run before any other verbs call of the process; if the host program
// made one first, it fails and fork of that process stays its problem.
func initForkSafety() {
	if C.ibv_is_fork_initialized() == C.IBV_FORK_DISABLED {
		C.ibv_fork_init()
	}
}

// noDeviceReason explains an ibv_get_device_list failure.
func noDeviceReason(err error) string {
	if err == unix.ENOSYS {
		return "the kernel has no RDMA (verbs) support"
	}
	if err == nil {
		return "failed"
	}
	return err.Error()
}

// probeDevice opens a device and reports its ports.
func probeDevice(d *C.struct_ibv_device) (*C.struct_ibv_context, []portFacts, error) {
	ctx, errno := C.ibv_open_device(d)
	if ctx == nil {
		return nil, nil, fmt.Errorf("ibv_open_device: %v", errno)
	}
	attr := C.sdp_query_device(ctx)
	if attr.err != 0 {
		C.ibv_close_device(ctx)
		return nil, nil, fmt.Errorf("ibv_query_device: %v", errnoOf(attr.err))
	}
	ports := make([]portFacts, 0, int(attr.phys_port_cnt))
	for num := 1; num <= int(attr.phys_port_cnt); num++ {
		pa := C.sdp_query_port(ctx, C.uint8_t(num))
		pf := portFacts{num: num, state: "not queryable"}
		if pa.err == 0 {
			pf.active = pa.state == C.IBV_PORT_ACTIVE
			pf.state = C.GoString(C.ibv_port_state_str(uint32(pa.state)))
		}
		ports = append(ports, pf)
	}
	return ctx, ports, nil
}

// init finishes Open on the chosen device and port.
func (p *Provider) init(port uint8) error {
	attr := C.sdp_query_device(p.ctx)
	if attr.err != 0 {
		return fmt.Errorf("rdma: %s: ibv_query_device: %v", p.name, errnoOf(attr.err))
	}
	p.caps = deviceCaps{maxWR: int(attr.max_qp_wr), maxSGE: int(attr.max_sge), maxInline: maxInlineLimit}
	p.maxCQE = int(attr.max_cqe)
	p.rdAtomic = min(int(attr.max_qp_rd_atom), 16)
	p.initRdAtomic = min(int(attr.max_qp_init_rd_atom), 16)

	pa := C.sdp_query_port(p.ctx, C.uint8_t(port))
	if pa.err != 0 {
		return fmt.Errorf("rdma: %s port %d: ibv_query_port: %v", p.name, port, errnoOf(pa.err))
	}
	p.port = portAttrs{num: port, lid: uint16(pa.lid), mtu: uint8(pa.active_mtu),
		global: pa.link_layer == C.IBV_LINK_LAYER_ETHERNET}
	gid := C.sdp_query_gid(p.ctx, C.uint8_t(port), C.int(p.opts.GIDIndex))
	if gid.err != 0 {
		return fmt.Errorf("rdma: %s port %d: ibv_query_gid index %d: %v: %w", p.name, port, p.opts.GIDIndex, errnoOf(gid.err), verbs.ErrNotSupported)
	}
	p.port.gid = *(*[16]byte)(unsafe.Pointer(&gid.raw))
	if p.port.global && p.port.gid == [16]byte{} {
		return fmt.Errorf("rdma: %s port %d: GID index %d is empty (RoCE needs a configured GID): %w", p.name, port, p.opts.GIDIndex, verbs.ErrNotSupported)
	}
	if !p.port.global && p.port.lid == 0 {
		return fmt.Errorf("rdma: %s port %d: no LID assigned (is a subnet manager running?): %w", p.name, port, verbs.ErrNotSupported)
	}

	pd, errno := C.ibv_alloc_pd(p.ctx)
	if pd == nil {
		return fmt.Errorf("rdma: %s: ibv_alloc_pd: %v", p.name, errno)
	}
	p.pd = pd
	ev, err := startAsyncEvents(p)
	if err != nil {
		C.ibv_dealloc_pd(p.pd)
		return err
	}
	p.events = ev
	p.cqs = make(map[*C.struct_ibv_cq]*completionQueue)
	p.qps = make(map[*queuePair]struct{})
	return nil
}

// Name returns "rdma".
func (p *Provider) Name() string { return "rdma" }

// Device returns the verbs device name and port the provider uses.
func (p *Provider) Device() (name string, port int) { return p.name, int(p.port.num) }

// Close releases the protection domain and the device (ibv_dealloc_pd,
// ibv_close_device); ErrBusy while objects made from it are open.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("rdma: close provider: %w", verbs.ErrClosed)
	}
	if n := p.regions.count() + len(p.cqs) + len(p.qps); n > 0 {
		p.mu.Unlock()
		return fmt.Errorf("rdma: close provider: %d objects open: %w", n, verbs.ErrBusy)
	}
	p.closed = true
	p.mu.Unlock()
	p.events.stop()
	if rc := C.ibv_dealloc_pd(p.pd); rc != 0 {
		return fmt.Errorf("rdma: close provider: ibv_dealloc_pd: %v", errnoOf(rc))
	}
	if rc := C.ibv_close_device(p.ctx); rc != 0 {
		return fmt.Errorf("rdma: close provider: ibv_close_device: %v", errnoOf(rc))
	}
	return nil
}

// newPSN returns a random initial packet sequence number.
func newPSN() uint32 { return rand.Uint32() & max24 }
