package mux

import (
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// A Stream is one connection carried by a Channel, with TCP semantics:
// Read returns what has arrived (io.EOF after the peer's FIN once drained,
// ErrReset after the peer's reset), Write sends everything unless the
// stream is nonblocking or a deadline passes (then it returns how much
// went), CloseWrite is shutdown(SHUT_WR), Close resets the peer when
// unread data is discarded, and the channel's end (peer gone, protocol
// violation) fails every call with its error. Deadlines fail calls with
// os.ErrDeadlineExceeded; nonblocking calls that cannot progress with
// ErrWouldBlock. Safe for concurrent use: concurrent Reads (and
// concurrent Writes) are serialised.
type Stream struct {
	c  *Channel
	id uint32
	ev streamEvent // signalled on every change a waiter may care about

	readMu  sync.Mutex // one Read or Peek at a time
	writeMu sync.Mutex // one Write at a time
	rwait   *wait.Waiter
	wwait   *wait.Waiter

	mu sync.Mutex
	fc wire.FlowController // +checklocks:mu

	// Receiving side; +checklocks:mu for all.
	rxq      []wire.Block          // in-order blocks not yet fully read
	rxOff    int                   // bytes of rxq[0] already read
	rxBytes  int                   // unread bytes in rxq (exact FIONREAD)
	rxNext   uint32                // next data sequence number
	rxHold   map[uint32]wire.Block // data blocks that arrived early
	ctrlNext uint32                // next control sequence number
	ctrlHold map[uint32]wire.Block // control blocks that arrived early
	finIn    bool                  // the peer's FIN arrived in order
	resetIn  bool                  // the peer reset the stream

	// Sending side; +checklocks:mu for all.
	sendq       []*chunk             // bytes queued, oldest first
	sendqBuf    [4]*chunk            // sendq's storage while short
	wchunk      chunk                // the chunk of the Write in progress (writeMu)
	queued      int                  // bytes in sendq
	owned       int                  // bytes of sendq copied into the stream
	ctrlOut     []wire.ControlRecord // records to send
	announce    bool                 // send a control block even without records
	txSeq       uint32
	txCtrl      uint32
	peerRcv     int // the peer's receive buffer in bytes (ControlRcvBuf); 0: no limit
	rcvBuf      int // ours, as last sent; 0: none
	sendBuf     int // bytes a buffered controller may copy; 0: the channel's SendBuffer
	finOut      finState
	resetOut    finState
	active      bool        // in the channel's active list
	sharePaused bool        // held back for its share (shareLocked)
	sched       schedCounts // preemptions and pauses, atomic
	calls       int         // application calls in progress (packed progress rule)

	// Life; +checklocks:mu for all.
	closed   bool  // Close called (or refused by the backlog)
	wrShut   bool  // CloseWrite called
	err      error // the channel's end
	deleted  bool  // removed from the channel
	nonblock bool
	rdl, wdl time.Time
	dlGen    uint64 // bumped by every deadline or mode change
}

// finState tracks a FIN or reset this side sends.
type finState uint8

const (
	finNone   finState = iota
	finQueued          // to be sent after the queued data
	finSent
)

// chunk is the unsent part of one Write: the caller's bytes while the
// Write waits, or a copy the stream owns (buffered controllers).
type chunk struct {
	b     []byte
	owned bool
}

// seqWindow bounds how far ahead of the next expected block a sequence
// number may be; a peer cannot have more blocks in flight.
const seqWindow = 1 << 20

func newStream(c *Channel, id uint32) *Stream {
	s := &Stream{
		c: c, id: id, fc: c.cfg.NewFlow(),
		rwait: wait.NewWaiter(c.cfg.NewPolicy()), wwait: wait.NewWaiter(c.cfg.NewPolicy()),
		rxHold: make(map[uint32]wire.Block), ctrlHold: make(map[uint32]wire.Block),
	}
	s.ev.intr = c.interrupt
	return s
}

// ID returns the stream's id on its channel.
func (s *Stream) ID() uint32 { return s.id }

// Channel returns the channel carrying the stream.
func (s *Stream) Channel() *Channel { return s.c }

// activateLocked puts the stream in the scheduler's list.
//
// +checklocks:s.mu
func (s *Stream) activateLocked() {
	if s.active || s.deleted {
		return
	}
	s.active = true
	s.c.actMu.Lock()
	s.c.active = append(s.c.active, s)
	s.c.actMu.Unlock()
}

// failLocked ends the stream with the channel's error. Data that arrived
// with the peer's FIN stays readable: it is copied out of the transport,
// which is about to close.
//
// +checklocks:s.mu
func (s *Stream) failLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	if s.closed && !s.deleted {
		s.c.prog.linger.Add(-1)
	}
	s.deleted = true
	if s.finIn && !s.closed {
		for i := range s.rxq {
			b := &s.rxq[i]
			old := *b
			b.Payload = append([]byte(nil), b.Payload...)
			b.Index = -1
			s.c.release(old)
		}
	} else {
		s.dropRxLocked()
	}
	s.dropHeldLocked()
	s.ev.signal()
}

// dropRxLocked releases every block of the in-order queue.
//
// +checklocks:s.mu
func (s *Stream) dropRxLocked() {
	for i := range s.rxq {
		s.c.release(s.rxq[i])
		s.rxq[i] = wire.Block{}
	}
	s.rxq, s.rxOff, s.rxBytes = s.rxq[:0], 0, 0
}

// dropHeldLocked releases the blocks that arrived out of order.
//
// +checklocks:s.mu
func (s *Stream) dropHeldLocked() {
	for k, b := range s.rxHold {
		s.c.release(b)
		delete(s.rxHold, k)
	}
	for k, b := range s.ctrlHold {
		s.c.release(b)
		delete(s.ctrlHold, k)
	}
}

// maybeDeleteLocked removes a closed stream from the channel once both
// sides' final blocks (FIN or reset) went: no block can name it any more.
//
// +checklocks:s.mu
func (s *Stream) maybeDeleteLocked() {
	if s.deleted || !s.closed || !(s.finIn || s.resetIn) || (s.finOut != finSent && s.resetOut != finSent) {
		return
	}
	s.deleted = true
	s.dropHeldLocked()
	c := s.c
	c.prog.linger.Add(-1)
	c.mu.Lock()
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	done := c.cfg.MaxStreams > 0 && c.opened >= c.cfg.MaxStreams && len(c.streams) == 0 && c.err == nil
	c.mu.Unlock()
	if done {
		go c.Close() // one channel per stream: the channel ends with it
	}
}
