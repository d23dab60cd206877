//go:build rdma && linux && cgo

package rdma_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/rdma"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestResolveNoRoute: where rdma_cm has no device or no route, Resolve
// fails with ErrNotSupported, in bounded time, and says so.
func TestResolveNoRoute(t *testing.T) {
	for _, a := range []string{"192.0.2.1", "::1"} { // TEST-NET-1, loopback
		addr := netip.MustParseAddr(a)
		start := time.Now()
		r, err := rdma.Resolve(addr, 200*time.Millisecond)
		if err == nil {
			t.Logf("%s: routed over %s port %d", a, r.Device, r.Port)
			continue
		}
		if !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "no RDMA route") {
			t.Errorf("%s: %v; want ErrNotSupported saying no RDMA route", a, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v with a 200ms timeout", a, d)
		}
		t.Logf("%s: %v", a, err)
	}
}

func TestResolveBadAddress(t *testing.T) {
	for _, a := range []netip.Addr{{}, netip.IPv4Unspecified(), netip.MustParseAddr("224.0.0.1")} {
		if _, err := rdma.Resolve(a, 0); !errors.Is(err, verbs.ErrInvalid) {
			t.Errorf("Resolve(%v): %v, want ErrInvalid", a, err)
		}
	}
	if _, err := rdma.Resolve(netip.MustParseAddr("192.0.2.1"), -time.Second); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("negative timeout: %v, want ErrInvalid", err)
	}
}
