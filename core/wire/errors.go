package wire

import "errors"

// Errors of the channel and stream layer. The shim maps them to errno in
// one table.
var (
	// ErrProtocol: the peer wrote something invalid into shared memory or
	// sent an invalid record; the channel is ended.
	ErrProtocol = errors.New("protocol violation by peer")
	// ErrPeerGone: the peer process died or its queue pair failed.
	ErrPeerGone = errors.New("peer gone")
	// ErrWouldBlock: a nonblocking operation could make no progress.
	ErrWouldBlock = errors.New("operation would block")
)
