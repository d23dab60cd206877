//go:build !rdma || !linux || !cgo

package rdma

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Provider is the RDMA device. In this build (without the rdma tag, or
// off Linux) Open never returns one; the methods exist so that callers
// compile the same way in every build.
type Provider struct{ _ struct{} }

var _ verbs.Provider = (*Provider)(nil)

var errNotBuilt = fmt.Errorf("rdma: %s: %w", buildHint, verbs.ErrNotSupported)

// Open returns an error wrapping verbs.ErrNotSupported that says how to
// build with RDMA support.
func Open(opts Options) (*Provider, error) {
	if _, err := opts.normalized(); err != nil {
		return nil, err
	}
	return nil, errNotBuilt
}

// Resolve returns an error wrapping verbs.ErrNotSupported that says how to
// build with RDMA support (after checking its arguments).
func Resolve(addr netip.Addr, timeout time.Duration) (Route, error) {
	if _, err := checkResolveArgs(addr, timeout); err != nil {
		return Route{}, err
	}
	return Route{}, errNotBuilt
}

func (*Provider) Name() string { return "rdma" }

func (*Provider) RegisterRegion(int, verbs.Access) (verbs.Region, error) { return nil, errNotBuilt }

func (*Provider) CreateCQ(int) (verbs.CompletionQueue, error) { return nil, errNotBuilt }

func (*Provider) CreateQP(verbs.QPConfig) (verbs.QueuePair, error) { return nil, errNotBuilt }

func (*Provider) Close() error { return errNotBuilt }
