//go:build rdma && linux && cgo

package rdma

// #include "sdp_verbs.h"
import "C"

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Resolve asks rdma_cm whether addr is reachable over RDMA and by which
// local device and port: rdma_create_event_channel, rdma_create_id
// (RDMA_PS_TCP), rdma_resolve_addr, then rdma_resolve_route, each step
// bounded by timeout (0 means 2s). It is the first half of the
// other-host connection setup (docs/rdma.md). Any failure to find a route
// (no rdma_cm device, address or route resolution failed or timed out)
// is an error wrapping verbs.ErrNotSupported, so the caller stays on TCP.
func Resolve(addr netip.Addr, timeout time.Duration) (Route, error) {
	timeout, err := checkResolveArgs(addr, timeout)
	if err != nil {
		return Route{}, err
	}
	noRoute := func(format string, args ...any) (Route, error) {
		return Route{}, fmt.Errorf("rdma: no RDMA route to %v: %s: %w", addr, fmt.Sprintf(format, args...), verbs.ErrNotSupported)
	}
	ch, errno := C.rdma_create_event_channel()
	if ch == nil {
		return noRoute("rdma_cm unavailable (rdma_create_event_channel: %v)", errno)
	}
	defer C.rdma_destroy_event_channel(ch)
	if err := unix.SetNonblock(int(ch.fd), true); err != nil {
		return noRoute("rdma_cm event channel: %v", err)
	}
	var id *C.struct_rdma_cm_id
	if rc, errno := C.rdma_create_id(ch, &id, nil, C.RDMA_PS_TCP); rc != 0 {
		return noRoute("rdma_create_id: %v", errno)
	}
	defer C.rdma_destroy_id(id)

	deadline := time.Now().Add(timeout)
	ms := C.int(timeout.Milliseconds())
	ip := C.struct_sdp_ip{family: C.AF_INET6}
	a16 := addr.As16()
	if addr.Unmap().Is4() {
		ip.family = C.AF_INET
		a4 := addr.Unmap().As4()
		copy(a16[:], a4[:])
	}
	for i, b := range a16 {
		ip.addr[i] = C.uint8_t(b)
	}
	if rc := C.sdp_cm_resolve_addr(id, ip, ms); rc != 0 {
		return noRoute("rdma_resolve_addr: %v", errnoOf(rc))
	}
	if err := awaitCMEvent(ch, C.RDMA_CM_EVENT_ADDR_RESOLVED, deadline); err != nil {
		return noRoute("address: %v", err)
	}
	if rc, errno := C.rdma_resolve_route(id, ms); rc != 0 {
		return noRoute("rdma_resolve_route: %v", errno)
	}
	if err := awaitCMEvent(ch, C.RDMA_CM_EVENT_ROUTE_RESOLVED, deadline); err != nil {
		return noRoute("route: %v", err)
	}
	dev := C.sdp_cm_device(id)
	if dev == nil {
		return noRoute("resolved, but bound to no verbs device")
	}
	return Route{Device: C.GoString(dev), Port: int(id.port_num)}, nil
}

// awaitCMEvent waits until deadline for the next event on a non-blocking
// rdma_cm channel and checks that it is want.
func awaitCMEvent(ch *C.struct_rdma_event_channel, want C.enum_rdma_cm_event_type, deadline time.Time) error {
	for {
		ev := C.sdp_cm_next_event(ch)
		if ev.err == 0 {
			if C.enum_rdma_cm_event_type(ev.event) != want {
				return fmt.Errorf("%s (status %d)", C.GoString(C.rdma_event_str(C.enum_rdma_cm_event_type(ev.event))), int(ev.status))
			}
			return nil
		}
		if ev.err != C.EAGAIN {
			return fmt.Errorf("rdma_get_cm_event: %v", errnoOf(ev.err))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("timed out waiting for %s", C.GoString(C.rdma_event_str(want)))
		}
		pfd := []unix.PollFd{{Fd: int32(ch.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return fmt.Errorf("poll rdma_cm channel: %w", err)
		}
	}
}
