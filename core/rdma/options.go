package rdma

import (
	"fmt"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Options selects the device and port Open uses and the transport
// parameters of its queue pairs. The zero value picks the first device
// with an active port and sensible defaults.
type Options struct {
	// Device is the verbs device name ("mlx5_0"); empty picks the first
	// device that has an active port.
	Device string
	// Port is the port number (from 1); 0 picks the first active port.
	Port int
	// GIDIndex is the GID table index used as the source GID when the
	// link needs a global route header (RoCE, or IB across subnets).
	GIDIndex int
	// RetryTimeout is the IB local ACK timeout exponent: a request is
	// retried after 4.096 us * 2^RetryTimeout without an ACK, seven times,
	// before it completes with StatusRetryExceeded. 0 means 16 (about
	// 0.27 s, so a dead peer is noticed in about two seconds).
	RetryTimeout int
	// MinRNRTimer is the IB receiver-not-ready NAK timer code (1..31) the
	// local queue pair advertises; 0 means 12 (0.64 ms). Senders retry
	// without limit (rnr_retry 7), as the contract's "a SEND waits for a
	// RECV" requires.
	MinRNRTimer int
}

const (
	defaultRetryTimeout = 16
	defaultMinRNRTimer  = 12
)

// normalized applies the defaults and checks the ranges.
func (o Options) normalized() (Options, error) {
	if o.RetryTimeout == 0 {
		o.RetryTimeout = defaultRetryTimeout
	}
	if o.MinRNRTimer == 0 {
		o.MinRNRTimer = defaultMinRNRTimer
	}
	switch {
	case o.Port < 0 || o.Port > 255:
		return o, fmt.Errorf("rdma: options: port %d not in 0..255: %w", o.Port, verbs.ErrInvalid)
	case o.GIDIndex < 0 || o.GIDIndex > 255:
		return o, fmt.Errorf("rdma: options: GID index %d not in 0..255: %w", o.GIDIndex, verbs.ErrInvalid)
	case o.RetryTimeout < 1 || o.RetryTimeout > 31:
		return o, fmt.Errorf("rdma: options: retry timeout %d not in 1..31: %w", o.RetryTimeout, verbs.ErrInvalid)
	case o.MinRNRTimer < 1 || o.MinRNRTimer > 31:
		return o, fmt.Errorf("rdma: options: min RNR timer %d not in 1..31: %w", o.MinRNRTimer, verbs.ErrInvalid)
	}
	return o, nil
}

// buildHint is what an error says when the package was built without
// RDMA support.
const buildHint = "sdpshim was built without RDMA support: install libibverbs-dev and librdmacm-dev and build with `go build -tags rdma` (Linux, cgo enabled)"
