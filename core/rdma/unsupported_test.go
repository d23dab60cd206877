//go:build !rdma || !linux || !cgo

package rdma

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

func TestOpenNotBuilt(t *testing.T) {
	p, err := Open(Options{})
	if p != nil || !errors.Is(err, verbs.ErrNotSupported) || !strings.Contains(err.Error(), "-tags rdma") {
		t.Fatalf("Open: %v, %v; want ErrNotSupported saying how to build with RDMA", p, err)
	}
	if _, err := Open(Options{Port: -1}); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("Open with bad options: %v, want ErrInvalid", err)
	}
	if _, err := Resolve(netip.MustParseAddr("192.0.2.1"), 0); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("Resolve: %v, want ErrNotSupported", err)
	}
	if _, err := Resolve(netip.Addr{}, 0); !errors.Is(err, verbs.ErrInvalid) {
		t.Errorf("Resolve of no address: %v, want ErrInvalid", err)
	}
}
