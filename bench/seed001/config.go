package seed001

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// blockPayload is the payload of one block: the paper's buffers of 8 KiB
// (BlockSize adds the header, rounded up to 64 bytes).
const blockPayload = 8 << 10

// setupTimeout bounds the setup exchange with the child.
const setupTimeout = 20 * time.Second

// Config is one channel's flow control and receive buffer; both
// processes build their end from the same Config.
type Config struct {
	Flow string // flowcontrol.NameCredit, NamePacked or NameNICAssist
	// Buffer is the receive buffer per direction in bytes: Buffer /
	// blockPayload blocks.
	Buffer int
	// Window is nicassist's W in bytes; 0 means a quarter of the buffer
	// (the shim's default, SDPSHIM_VWINDOW=auto).
	Window int
}

// blocks returns the number of blocks of the receive buffer.
func (c Config) blocks() int { return max(2, c.Buffer/blockPayload) }

// blockSize returns the transport's block size, header included.
func (c Config) blockSize() int { return (blockPayload + wire.HeaderSize + 63) &^ 63 }

// params returns the controller's Params for a transport whose blocks
// carry maxPay bytes: K is every block (the paper's credit scheme: one
// credit per receive buffer) and W a quarter of the buffer (the shim's
// default, SDPSHIM_VWINDOW=auto).
func (c Config) params(maxPay int) flowcontrol.Params {
	capacity := c.blocks() * maxPay
	w := c.Window
	if w == 0 {
		w = max(maxPay, capacity/4)
	}
	return flowcontrol.Params{
		Credits:         c.blocks(),
		VirtualWindow:   min(w, capacity),
		ReceiveCapacity: capacity,
		BlockPayload:    maxPay,
	}
}

// channel is one end of a measurement channel.
type channel struct {
	*mux.Channel
	tr *statusbyte.Transport

	mu    sync.Mutex
	flows []wire.FlowController // every controller made, in order
}

// openChannel sets up this process's end of the channel over the setup
// socket fd (the caller keeps fd). The transport's flow-control name is
// the controller's signature, so two ends configured differently fail
// here.
func openChannel(fd int, c Config) (*channel, error) {
	p, err := sharedProvider()
	if err != nil {
		return nil, err
	}
	sig := flowcontrol.Signature(c.Flow, c.params(c.blockSize()-wire.HeaderSize))
	tr, err := statusbyte.Open(p, fd, statusbyte.Config{Blocks: c.blocks(), BlockSize: c.blockSize(), Flow: sig}, time.Now().Add(setupTimeout))
	if err != nil {
		return nil, fmt.Errorf("statusbyte: %w", err)
	}
	mk, err := flowcontrol.New(c.Flow, c.params(tr.MaxPayload()))
	if err != nil {
		tr.Close()
		return nil, err
	}
	ch := &channel{tr: tr}
	ch.Channel, err = mux.NewChannel(tr, mux.ChannelConfig{
		Initiator: tr.Initiator(),
		NewFlow: func() wire.FlowController {
			fc := mk()
			ch.mu.Lock()
			ch.flows = append(ch.flows, fc)
			ch.mu.Unlock()
			return fc
		},
		// One stream per channel: no retention (it would pause the stream
		// after 2 unread blocks, whatever its flow control); the default
		// cap on held blocks leaves one for control records.
		RetainAfter: -1,
	})
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// lastFlowStats returns the accounting of the controller made last (the
// stream this end opened or accepted last).
func (ch *channel) lastFlowStats() flowcontrol.Stats {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.flows) == 0 {
		return flowcontrol.Stats{}
	}
	return ch.flows[len(ch.flows)-1].(flowcontrol.StatsSource).Stats()
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds, comparable across the
// two processes.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // CLOCK_MONOTONIC always exists on Linux
	}
	return ts.Nano()
}
