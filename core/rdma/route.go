package rdma

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Route is where rdma_cm would carry a connection to a remote address:
// the local device and port its route leaves by.
type Route struct {
	Device string // verbs device name
	Port   int    // port number, from 1
}

// defaultResolveTimeout bounds Resolve when its timeout is 0.
const defaultResolveTimeout = 2 * time.Second

// checkResolveArgs validates Resolve's arguments in every build.
func checkResolveArgs(addr netip.Addr, timeout time.Duration) (time.Duration, error) {
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() {
		return 0, fmt.Errorf("rdma: resolve %v: not a unicast address: %w", addr, verbs.ErrInvalid)
	}
	if timeout < 0 {
		return 0, fmt.Errorf("rdma: resolve %v: negative timeout: %w", addr, verbs.ErrInvalid)
	}
	if timeout == 0 {
		timeout = defaultResolveTimeout
	}
	// rdma_resolve_addr takes an int of milliseconds; keep well inside.
	return min(max(timeout, time.Millisecond), time.Hour), nil
}
