package shim

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core"
	"github.com/sdpshim/sdpshim/core/slidingwindow"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/flowcontrol"
	"github.com/sdpshim/sdpshim/shim/config"
)

// channelTransport is what the shim needs of a block transport beyond
// core.Transport: the role setup gave it.
type channelTransport interface {
	core.Transport
	Initiator() bool
}

// establish sets up one end of a channel with the process at the other
// end of the connected unix stream socket fd (one end of a socketpair the
// connector made and passed in its offer), as configured: transport,
// blocks, block size and flow control must agree with the peer's, or
// setup fails (core.ErrMismatch). fd stays the caller's.
func (p *Process) establish(fd int, deadline time.Time) (*core.Channel, error) {
	pr, err := p.shmProvider()
	if err != nil {
		return nil, fmt.Errorf("shm provider: %w", err)
	}
	c := p.cfg
	var t channelTransport
	switch c.Transport {
	case config.TransportSlidingWindow:
		t, err = slidingwindow.Open(pr, fd, slidingwindow.Config{Blocks: c.Blocks, BlockSize: c.BlockSize, Flow: string(c.Flow)}, deadline)
	default:
		t, err = statusbyte.Open(pr, fd, statusbyte.Config{Blocks: c.Blocks, BlockSize: c.BlockSize, Flow: string(c.Flow)}, deadline)
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
	cc := core.ChannelConfig{Initiator: t.Initiator(), NewFlow: withProgress(newFlow), NewPolicy: p.policy}
	if c.Channel == config.ChannelPerConnection {
		cc.MaxStreams = 1
	}
	ch, err := core.NewChannel(t, cc)
	if err != nil {
		t.Close()
		return nil, err
	}
	return ch, nil
}

// withProgress makes every controller flush held bytes in the background
// (AsyncFlush). The packed algorithm sends bytes it coalesced only when
// the application next calls in (the paper's progress problem); a
// transparent socket has no such promise: a program may write to one
// socket and then wait on another for an answer that needs those bytes,
// which on kernel TCP always arrive. So the shim never leaves bytes behind
// the application's back; packed keeps its packing and its accounting.
func withProgress(newFlow func() core.FlowController) func() core.FlowController {
	return func() core.FlowController {
		fc := newFlow()
		if fc.AsyncFlush() {
			return fc
		}
		return progressFlow{fc}
	}
}

// progressFlow is a flow controller whose held bytes flush in the
// background.
type progressFlow struct{ core.FlowController }

func (progressFlow) AsyncFlush() bool { return true }

// Unwrap returns the controller itself (for its optional abilities: stats).
func (f progressFlow) Unwrap() core.FlowController { return f.FlowController }
