package seed000

import (
	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// The stream-level experiments run mux.Channel over either transport with
// the seed's own flow control: none above the transport, one block per
// write (a write larger than a block takes as many as it needs), so that
// every message costs the transport one block as in the paper, and the
// writer posts its own blocks (no asynchronous flush: the progress
// goroutine and its doorbells stay out of the data path, as the seed's
// sender has no helper thread; in four paired runs that took 0-40% off
// the sender's CPU at 256 B).

// streamLink is the transport shape of the stream-level experiments: 64
// blocks of 64 KiB of payload (plus the header, rounded to 64 bytes).
var streamLink = LinkConfig{Blocks: 64, BlockSize: 64<<10 + 64}

// blockFlow is the seed's flow control: one block per write, no records.
type blockFlow struct{}

func (blockFlow) Name() string                            { return flowName }
func (blockFlow) NextSegment(queued, msg, max int) int    { return min(msg, max) }
func (blockFlow) Sent(int)                                {}
func (blockFlow) Buffered() bool                          { return false }
func (blockFlow) AsyncFlush() bool                        { return false }
func (blockFlow) Open() []wire.ControlRecord              { return nil }
func (blockFlow) Consumed(int) (wire.ControlRecord, bool) { return wire.ControlRecord{}, false }
func (blockFlow) OnControl(wire.ControlRecord) error      { return nil }
func (blockFlow) Arrived(int) error                       { return nil }

// openChannel starts a channel over l whose waits use wait mode mode
// (wait.WaitModeBusy, ...); the channel owns l's transport from now on.
func openChannel(l *link, mode string) (*mux.Channel, error) {
	if _, err := wait.NewWaitPolicy(mode, wait.DefaultPollParams()); err != nil {
		return nil, err
	}
	return mux.NewChannel(l.Transport, mux.ChannelConfig{
		Initiator: l.initiator,
		NewFlow:   func() wire.FlowController { return blockFlow{} },
		NewPolicy: func() wait.WaitPolicy {
			p, _ := wait.NewWaitPolicy(mode, wait.DefaultPollParams()) // checked above
			return p
		},
	})
}

// streamPeer starts a child running role over tr with the stream shape
// and opens this side's channel.
func streamPeer(j job, tr string) (*peerProc, *link, *mux.Channel, error) {
	j.Link = streamLink
	j.Link.Transport = tr
	pp, l, err := startPeer(j)
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err := openChannel(l, j.Wait)
	if err != nil {
		l.close()
		pp.kill()
		return nil, nil, nil, err
	}
	return pp, l, ch, nil
}
