package mux

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// A Channel carries every stream between two processes over one
// Transport (docs/design.md, "Channel, blocks, streams"). Each block names its
// stream and a per-stream sequence number; the receiving side puts a
// stream's blocks back in order and hands them to its reader, while blocks
// of other streams go on: a stream whose reader stops has its blocks
// retained (on a Retainer transport) and capped (on a BlockCounter
// transport), and the others keep the remaining blocks. Control blocks
// (flow-control records) have their own sequence and go to the stream's
// FlowController as they arrive, never behind unread data.
//
// The send side is shared by all streams: writes are cut into sub-writes
// and a scheduler gives the streams turns, small messages first (seed
// 003, message-level and stream-level preemption; sched.go), so a bulk
// stream never starves a small one.
// Whoever writes runs the scheduler for everyone (flat combining), so an
// idle channel never waits; likewise whoever waits for data moves every
// stream's arrivals (the pump). A waiting Read, Write or Accept polls per
// its wait policy, then sleeps on the transport's doorbells itself
// (BellPair transports; see localBell) or on its stream event while
// progress goroutines sleep on the doorbells for it. The progress
// goroutines also flush without the application (FlowController.
// AsyncFlush, closed streams) and see closed streams' final blocks.
//
// Lock order: Stream.readMu/writeMu, Channel.sendMu, Channel.recvMu,
// Stream.mu, Channel.actMu, Channel.mu, then the transport's locks.
// Channel.mu is never held while taking a Stream.mu.
type Channel struct {
	t       wire.Transport
	cfg     ChannelConfig
	maxPay  int
	ret     wire.Retainer     // nil unless the transport retains
	counter wire.BlockCounter // nil unless the transport counts held blocks
	heldCap int               // blocks one stream may hold; 0: no cap
	reserve bool              // data leaves the last free block to control blocks (reserveLocked)

	mu        sync.Mutex
	streams   map[uint32]*Stream   // live streams; +checklocks:mu
	ids       streamIDs            // +checklocks:mu
	acceptq   []*Stream            // +checklocks:mu
	err       error                // what ended the channel; +checklocks:mu
	opened    int                  // streams ever created; +checklocks:mu
	acceptEv  streamEvent          // an accept or the end
	dead      atomic.Bool          // err is set
	failedCh  chan struct{}        // closed when err is set
	ctrlBuf   []wire.ControlRecord // +checklocks:recvMu
	recvMu    sync.Mutex           // the receive pump
	sendMu    sync.Mutex           // the scheduler
	actMu     sync.Mutex           // active list
	active    []*Stream            // streams with something to send; +checklocks:actMu
	rr        int                  // round-robin position; +checklocks:sendMu
	turn      int                  // data blocks per turn, 0: no limit (turnBlocks)
	resume    *Stream              // goes first next round; +checklocks:sendMu
	order     []*Stream            // this round's visiting order; +checklocks:sendMu
	rest      []*Stream            // +checklocks:sendMu
	waiting   int                  // streams of this round with data; +checklocks:sendMu
	gather    []byte               // +checklocks:sendMu
	snap      []*Stream            // +checklocks:sendMu
	ctrlWire  []byte               // +checklocks:sendMu
	flushReq  atomic.Bool          // a flush was asked while one ran
	pumpReq   atomic.Bool          // a control record arrived: flush after the pump
	pumpAgain atomic.Bool          // a pump was asked while one ran
	prog      progress             // the progress goroutines
	closed    chan struct{}        // closed by Close once the goroutines exited
	closing   sync.Once
}

// ChannelConfig configures a channel; NewFlow is required.
type ChannelConfig struct {
	// Initiator must be true on exactly one side (see Link.Initiator):
	// its streams get odd ids, the other side's even ones.
	Initiator bool
	// NewFlow makes the flow controller of each stream end.
	NewFlow func() wire.FlowController
	// NewPolicy makes a wait policy for each waiting side of each stream
	// (two per stream); nil means the adaptive policy with default
	// parameters.
	NewPolicy func() wait.WaitPolicy
	// SendBuffer bounds the bytes a buffered (coalescing) controller may
	// hold in software per stream; 0 means 256 KiB.
	SendBuffer int
	// RetainAfter is how many unread blocks a stream may hold before its
	// further blocks are retained (Retainer transports); 0 means 2, a
	// negative value never retains.
	RetainAfter int
	// MaxHeld caps the blocks one stream may hold at the receiver
	// (BlockCounter transports); 0 means three quarters of the blocks,
	// and always one less than all of them (at least 1), so that a stream
	// whose reader stopped leaves a block for control records (credit
	// returns, window posts) and other streams; a negative value no cap.
	MaxHeld int
	// MaxStreams bounds the streams the channel ever carries; 0 means no
	// bound. 1 is the one-channel-per-connection mode (SDPSHIM_CHANNEL=
	// per-connection): the channel closes itself when its stream is done.
	MaxStreams int
	// Backlog bounds streams opened by the peer and not yet accepted;
	// further ones are reset. 0 means 128.
	Backlog int
	// SubWrite is the sub-write size of preemption (sched.go): a stream
	// sends at most this many bytes of data, in whole blocks, before the
	// others get their turn. 0 means one block; a negative value turns
	// preemption off (a stream keeps its turn while it can send, and no
	// stream is paused for its share).
	SubWrite int
}

// Errors of the channel and stream layer besides those of errors.go.
var (
	// ErrReset: the peer reset the stream (closed it with unread data,
	// or refused it); like ECONNRESET.
	ErrReset = errors.New("stream reset by peer")
	// ErrStreamClosed: the stream was closed on this side; like EBADF.
	ErrStreamClosed = errors.New("use of closed stream")
	// ErrWriteShutdown: a write after CloseWrite; like EPIPE.
	ErrWriteShutdown = errors.New("write after shutdown")
)

// NewChannel starts a channel over t, which it owns from now on (Close
// closes it).
func NewChannel(t wire.Transport, cfg ChannelConfig) (*Channel, error) {
	if cfg.NewFlow == nil || t == nil {
		return nil, fmt.Errorf("channel: no transport or flow controller: %w", verbs.ErrInvalid)
	}
	if cfg.NewPolicy == nil {
		cfg.NewPolicy = defaultPolicy
	}
	if cfg.SendBuffer <= 0 {
		cfg.SendBuffer = 256 << 10
	}
	if cfg.RetainAfter == 0 {
		cfg.RetainAfter = 2
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 128
	}
	c := &Channel{
		t: t, cfg: cfg, maxPay: t.MaxPayload(), turn: turnBlocks(cfg.SubWrite, t.MaxPayload()),
		streams: make(map[uint32]*Stream), failedCh: make(chan struct{}), closed: make(chan struct{}),
	}
	c.ids.init(cfg.Initiator)
	c.acceptEv.intr = c.interrupt
	c.ret, _ = t.(wire.Retainer)
	if c.counter, _ = t.(wire.BlockCounter); c.counter != nil {
		c.reserve = c.counter.Blocks() >= 2
	}
	if c.counter != nil && cfg.MaxHeld >= 0 {
		c.heldCap = cfg.MaxHeld
		if c.heldCap == 0 {
			n := c.counter.Blocks()
			c.heldCap = max(1, n-max(1, n/4))
		}
	}
	c.prog.start(c)
	return c, nil
}

func defaultPolicy() wait.WaitPolicy {
	p, err := wait.NewWaitPolicy(wait.WaitModeAdaptive, wait.DefaultPollParams())
	if err != nil {
		panic(err) // the defaults are valid
	}
	return p
}

// Open opens a new stream to the peer; the peer's Accept returns it. It
// does not wait: the stream is announced with its first block.
func (c *Channel) Open() (*Stream, error) { return c.OpenRcvBuf(0) }

// OpenRcvBuf is Open for a stream whose receive buffer is rcvBuf bytes
// (SetRcvBuf; 0: none): the announcement carries it, so the peer knows the
// limit before its first write.
func (c *Channel) OpenRcvBuf(rcvBuf int) (*Stream, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if c.cfg.MaxStreams > 0 && c.opened >= c.cfg.MaxStreams {
		c.mu.Unlock()
		return nil, fmt.Errorf("channel: %d streams already: %w", c.opened, verbs.ErrBusy)
	}
	id, err := c.ids.alloc()
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	s := newStream(c, id)
	c.streams[id] = s
	c.opened++
	c.mu.Unlock()
	s.mu.Lock()
	s.ctrlOut = append(s.ctrlOut, s.fc.Open()...)
	if rcvBuf > 0 {
		s.rcvBuf = min(rcvBuf, math.MaxInt32)
		s.ctrlOut = append(s.ctrlOut, wire.ControlRecord{Kind: wire.ControlRcvBuf, Value: uint32(s.rcvBuf)})
	}
	s.announce = true
	s.activateLocked()
	s.mu.Unlock()
	c.flush()
	return s, nil
}

// Accept returns the next stream the peer opened, waiting until deadline
// (zero: none); os.ErrDeadlineExceeded when it passes, the channel's error
// once it ended.
func (c *Channel) Accept(deadline time.Time) (*Stream, error) {
	w := wait.NewWaiter(c.cfg.NewPolicy())
	for {
		c.mu.Lock()
		if len(c.acceptq) > 0 {
			s := c.acceptq[0]
			c.acceptq[0] = nil
			c.acceptq = c.acceptq[1:]
			c.mu.Unlock()
			return s, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		ready := func() bool {
			c.pump()
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.acceptq) > 0 || c.err != nil
		}
		if err := w.Wait(ready, c.localBell(&c.acceptEv, false), deadline); err != nil {
			return nil, err
		}
	}
}

// Err returns the error that ended the channel, or nil.
func (c *Channel) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Streams returns the number of live streams.
func (c *Channel) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}

// Close ends the channel abortively: every stream's calls fail with an
// error wrapping ErrClosed (data a stream received together with its FIN
// stays readable), the transport is closed (the peer's streams end with
// ErrPeerGone) and Close returns once the progress goroutines exited.
func (c *Channel) Close() error {
	c.fail(fmt.Errorf("channel: %w", verbs.ErrClosed))
	<-c.closed
	return nil
}

// fail ends the channel with err (the first error wins): every stream is
// told, unread data of streams that got their FIN is copied out of the
// transport, and the transport is closed.
func (c *Channel) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.dead.Store(true)
	close(c.failedCh)
	all := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		all = append(all, s)
	}
	clear(c.streams)
	c.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		s.failLocked(err)
		s.mu.Unlock()
	}
	c.acceptEv.signal()
	c.closing.Do(func() {
		go func() {
			// Not on the caller's goroutine: it may be a progress goroutine
			// that Transport.Close waits for.
			c.t.Close()
			c.prog.wait()
			close(c.closed)
		}()
	})
}
