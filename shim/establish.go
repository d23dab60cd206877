package shim

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/slidingwindow"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
	"github.com/sdpshim/sdpshim/shim/config"
)

// channelTransport is what the shim needs of a block transport beyond
// wire.Transport: the role setup gave it.
type channelTransport interface {
	wire.Transport
	Initiator() bool
}

// establish sets up one end of a channel with the process at the other
// end of the connected unix stream socket fd (one end of a socketpair the
// connector made and passed in its offer), as configured: transport,
// blocks, block size and flow control must agree with the peer's, or
// setup fails (setup.ErrMismatch). fd stays the caller's. peerPID (the
// other process) is for the stats registry, which lists the channel until
// it ends.
func (p *Process) establish(fd, peerPID int, deadline time.Time) (*mux.Channel, error) {
	pr, err := channelProvider()
	if err != nil {
		return nil, fmt.Errorf("shm provider: %w", err)
	}
	c := p.cfg
	// The name compared at setup carries the credits or window too: ends
	// configured differently fail here (setup.ErrMismatch), not mid-stream.
	// The window's cap below is the same on both ends once blocks and
	// block size matched.
	flow := flowcontrol.Signature(string(c.Flow), flowcontrol.Params{Credits: min(c.Credits, c.Blocks), VirtualWindow: c.VirtualWindow})
	var t channelTransport
	switch c.Transport {
	case config.TransportSlidingWindow:
		t, err = slidingwindow.Open(pr, fd, slidingwindow.Config{Blocks: c.Blocks, BlockSize: c.BlockSize, Flow: flow}, deadline)
	default:
		t, err = statusbyte.Open(pr, fd, statusbyte.Config{Blocks: c.Blocks, BlockSize: c.BlockSize, Flow: flow}, deadline)
	}
	if err != nil {
		return nil, fmt.Errorf("%s transport: %w", c.Transport, err)
	}
	capacity := c.Blocks * t.MaxPayload()
	newFlow, err := flowcontrol.New(string(c.Flow), flowcontrol.Params{
		Credits:         min(c.Credits, c.Blocks),
		VirtualWindow:   min(c.VirtualWindow, capacity),
		ReceiveCapacity: capacity,
		BlockPayload:    t.MaxPayload(),
	})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("flow control: %w", err)
	}
	cc := mux.ChannelConfig{Initiator: t.Initiator(), NewFlow: shimFlow(c.Flow, newFlow), NewPolicy: p.policy}
	if c.Channel == config.ChannelPerConnection {
		cc.MaxStreams = 1
	}
	cc.SubWrite = subWrite(c, t.MaxPayload())
	ch, err := mux.NewChannel(t, cc)
	if err != nil {
		t.Close()
		return nil, err
	}
	p.addChannelStats(ch, t, peerPID)
	go p.closeProviderWhenDone(ch, pr)
	return ch, nil
}

// subWrite returns the channel's sub-write size for SDPSHIM_PREEMPT: the
// blocks its size covers (whole blocks, header included, at least one)
// times a block's payload; -1 (preemption off) for SDPSHIM_PREEMPT=0.
func subWrite(c config.Config, payload int) int {
	if !c.Preempt || c.PreemptChunk <= 0 {
		return -1
	}
	return max(1, c.PreemptChunk/c.BlockSize) * payload
}

// shimFlow returns the controllers the shim runs for algorithm, decided
// per algorithm:
//
//   - credit: as it is. Nothing is held once a Write returns (it waits
//     until its bytes are in blocks), so there is nothing to flush.
//   - nicassist: as it is. It has its own progress: a window post wakes
//     the channel's progress goroutine, which flushes held bytes.
//   - packed: with a background flush (progressFlow). As in the paper it
//     sends bytes it coalesced only when the application next calls in
//     (the progress problem); a transparent socket has no such promise: a
//     program may write to one socket and then wait on another for an
//     answer that needs those bytes, which on kernel TCP always arrive. So
//     the shim never leaves bytes behind the application's back; packed
//     keeps its packing and its accounting. The seed 001 benchmarks
//     (bench/seed001) run packed bare, with the paper's semantics.
func shimFlow(algorithm config.Flow, newFlow func() wire.FlowController) func() wire.FlowController {
	if algorithm != config.FlowPacked {
		return newFlow
	}
	return func() wire.FlowController { return progressFlow{newFlow()} }
}

// progressFlow is a flow controller whose held bytes flush in the
// background (packed in the shim).
type progressFlow struct{ wire.FlowController }

func (progressFlow) AsyncFlush() bool { return true }

// Unwrap returns the controller itself (for its optional abilities: stats).
func (f progressFlow) Unwrap() wire.FlowController { return f.FlowController }
