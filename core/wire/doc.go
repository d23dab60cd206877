// Package wire is what travels in a block and the contracts of the layers
// that move blocks. It holds the block header (BlockHeader, its codec and
// validation, header.go), control records (ControlRecord and its codec),
// the errors of the channel and stream layer (ErrProtocol, ErrPeerGone,
// ErrWouldBlock), and the interfaces that the multiplexer (core/mux)
// calls and others implement: Transport, Retainer, BlockCounter and
// BellPair (the transports: core/statusbyte, core/slidingwindow) and
// FlowController (package flowcontrol).
//
// It imports only core/wait, for the Doorbell a Transport hands out.
package wire
