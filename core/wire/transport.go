package wire

import (
	"github.com/sdpshim/sdpshim/core/wait"
)

// BlockFlags say what a block carries.
type BlockFlags uint8

const (
	// FlagData marks stream payload.
	FlagData BlockFlags = 1 << iota
	// FlagFIN marks the stream's last block from this side (shutdown
	// SHUT_WR or close); it may carry payload.
	FlagFIN
	// FlagControl marks a block whose payload is control records
	// (ControlRecord, e.g. a credit return or a window post) for the
	// stream, not stream bytes.
	FlagControl
	// FlagReset marks an abortive close (the stream's peer end is gone).
	FlagReset
)

// BlockHeader is what precedes every block's payload on the wire. Every
// field read from shared memory is validated before use (see the codec).
type BlockHeader struct {
	Stream uint32     // stream id, unique per channel
	Seq    uint32     // per-stream, per-direction sequence number, from 0
	Len    uint32     // payload bytes, <= the transport's MaxPayload
	Flags  BlockFlags // FlagData, FlagFIN, FlagControl, FlagReset
}

// Block is a received block: its header and payload. Payload aliases the
// transport's memory and stays valid until the block is released.
type Block struct {
	BlockHeader
	Payload []byte
	Index   int // the transport's slot, for Release
}

// Transport carries blocks of many streams between two processes over one
// queue pair: the status-byte channel (seed 000) or the sliding-window
// baseline. Stream multiplexing, ordering per stream and flow control sit
// above it. Methods are safe for concurrent use.
type Transport interface {
	// MaxPayload returns the largest payload one block carries.
	MaxPayload() int
	// TrySend writes one block, header then payload, if the receiver has
	// room for it now; it never waits. When its view of the receiver shows
	// no room it refreshes that view once (the status READ) before giving
	// up with ok=false. hdr.Len is taken from len(payload). An error means
	// the transport failed (peer gone, queue pair in error) and is final.
	TrySend(hdr BlockHeader, payload []byte) (ok bool, err error)
	// Receive returns the oldest arrived block not yet returned, or
	// ok=false when none has arrived. A block whose header fails
	// validation ends the transport with an error wrapping ErrProtocol.
	Receive() (b Block, ok bool, err error)
	// Release gives a received block's space back to the sender. Blocks
	// may be released in any order; a transport that frees space only in
	// order (sliding window) holds an early release until the blocks before
	// it are released.
	Release(b Block)
	// SpaceBell is the doorbell a sender sleeps on when TrySend found no
	// room; the peer rings it when it releases a block.
	SpaceBell() wait.Doorbell
	// DataBell is the doorbell a receiver sleeps on when Receive found
	// nothing; the peer rings it when it sends a block.
	DataBell() wait.Doorbell
	// Close ends the transport: the peer's waits return an error and its
	// later Receive calls report the end once the blocks already arrived
	// have been returned.
	Close() error
}

// Retainer is implemented by transports that can hold a block without
// stopping the rest (the status-byte channel's status 2).
type Retainer interface {
	// Retain marks a received, unreleased block as retained: the sender
	// skips its slot and learns (on its next status refresh) that the
	// block's stream is not being read. Release ends the retention.
	Retain(b Block)
	// Retained reports, on the sending side, whether the peer currently
	// retains a block of stream id (as of the last status refresh).
	Retained(stream uint32) bool
}

// BellPair is implemented by transports whose data and space doorbells
// can be slept on with one handle (the status-byte channel: both ring on
// one completion queue). The channel then runs one progress goroutine
// instead of two, which saves a wakeup on every sleep.
type BellPair interface {
	// Bells returns a new doorbell handle that rings when a block arrives
	// (data) and when the peer releases a block (space).
	Bells(data, space bool) wait.Doorbell
	// Interrupt ends the sleeps in progress on the transport's doorbells
	// as spurious wakeups (nil): the progress goroutine re-arms with the
	// bells it needs now.
	Interrupt()
}
