package seed000

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/core/slidingwindow"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// The two transports the seed compares.
const (
	StatusByte    = statusbyte.Name
	SlidingWindow = slidingwindow.Name
)

// Transports lists them in table order.
var Transports = []string{StatusByte, SlidingWindow}

// flowName is what both sides announce as their flow controller.
const flowName = "seed000"

// setupTimeout bounds the setup exchange with the peer.
const setupTimeout = 20 * time.Second

// LinkConfig says which transport joins the two processes and its shape.
type LinkConfig struct {
	Transport string // StatusByte or SlidingWindow
	Blocks    int    // blocks per direction
	BlockSize int    // bytes per block, header included (a multiple of 64)
}

// link is one side's transport over its own shm provider.
type link struct {
	wire.Transport
	initiator bool
	prov      verbs.Provider
}

// openLink sets up lc's transport with the peer at the other end of the
// unix stream socket fd (the caller keeps fd).
func openLink(fd int, lc LinkConfig) (*link, error) {
	p, err := shm.Open()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(setupTimeout)
	l := &link{prov: p}
	switch lc.Transport {
	case StatusByte:
		var t *statusbyte.Transport
		t, err = statusbyte.Open(p, fd, statusbyte.Config{Blocks: lc.Blocks, BlockSize: lc.BlockSize, Flow: flowName}, deadline)
		if err == nil {
			l.Transport, l.initiator = t, t.Initiator()
		}
	case SlidingWindow:
		var t *slidingwindow.Transport
		t, err = slidingwindow.Open(p, fd, slidingwindow.Config{Blocks: lc.Blocks, BlockSize: lc.BlockSize, Flow: flowName}, deadline)
		if err == nil {
			l.Transport, l.initiator = t, t.Initiator()
		}
	default:
		err = fmt.Errorf("seed000: unknown transport %q", lc.Transport)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return l, nil
}

// close closes the transport and the provider.
func (l *link) close() {
	l.Transport.Close()
	l.prov.Close()
}

// statusReads returns the status-byte transport's status READs so far
// (0 for the sliding window).
func (l *link) statusReads() uint64 {
	if t, ok := l.Transport.(*statusbyte.Transport); ok {
		return t.Stats().StatusReads
	}
	return 0
}
