package shim

import (
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/wire"
)

// dataStream is what carries an accelerated socket's bytes: a stream of
// a shared channel (*mux.Stream, the seed transports) or a direct area
// (*directStream, direct.go). Every method is safe for concurrent use and
// never blocks; its contract is mux.Stream's.
type dataStream interface {
	// Read and Peek copy arrived bytes out (Peek leaves them): n > 0, or
	// io.EOF after the peer's FIN, wire.ErrWouldBlock when nothing has
	// arrived, an error that errnoOf maps (ECONNRESET: reset, peer gone).
	Read(p []byte) (int, error)
	Peek(p []byte) (int, error)
	// Write moves what fits now: n > 0, or wire.ErrWouldBlock, or an
	// error (EPIPE after CloseWrite, ECONNRESET).
	Write(p []byte) (int, error)
	// CloseWrite sends the FIN after what was written; Close ends the
	// stream (a FIN, or a reset when unread bytes are dropped); Abort
	// resets it.
	CloseWrite() error
	Close() error
	Abort() error
	// ReadReady and WriteReady say whether a Read or Write would not wait
	// (data, EOF or an error; room or an error), moving the channel first;
	// the Now variants read the state as the last move left it.
	ReadReady() bool
	WriteReady() bool
	ReadReadyNow() bool
	WriteReadyNow() bool
	// Buffered is the bytes readable now; Unsent the bytes written but
	// still held in this process (a coalescing flow controller's);
	// Drained whether nothing is held any more and the end was sent.
	Buffered() int
	Unsent() int
	Drained() bool
	// Attend and Unattend bracket the time a thread sleeps on the stream
	// (its channel's progress goroutines stay awake meanwhile).
	Attend()
	Unattend()
	// SetNotify sets what is called on every event of the stream (nil:
	// nothing); SetNonblock, SetWriteDeadline, SetSendBuf and SetRcvBuf
	// set how the stream's own calls behave.
	SetNotify(fn func())
	SetNonblock(nonblock bool)
	SetWriteDeadline(t time.Time) error
	SetSendBuf(n int)
	SetRcvBuf(n int)
	// ID is the stream's id on its channel; Channel the channel (nil for a
	// direct stream); Flow its flow controller (nil for a direct stream).
	ID() uint32
	Channel() *mux.Channel
	Flow() wire.FlowController
}

var _ dataStream = (*mux.Stream)(nil)

// streamSlot holds a socket's dataStream, read without a lock.
type streamSlot struct{ p atomic.Pointer[streamBox] }

type streamBox struct{ dataStream }

// Load returns the stream, or nil (a nil interface) before there is one.
func (s *streamSlot) Load() dataStream {
	if b := s.p.Load(); b != nil {
		return b.dataStream
	}
	return nil
}

// Store sets the stream (never nil).
func (s *streamSlot) Store(st dataStream) { s.p.Store(&streamBox{st}) }

// direct returns the socket's direct stream, or nil.
func (s *Socket) direct() *directStream {
	ds, _ := s.stream.Load().(*directStream)
	return ds
}
