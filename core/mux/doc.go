// Package mux multiplexes streams over one transport: a Channel carries
// many Streams (the accelerated connections) over one wire.Transport, in
// one queue pair, with per-stream ordering, flow control through a
// wire.FlowController per stream end, a scheduler that shares the blocks
// among streams, and progress goroutines that sleep on the transport's
// doorbells while someone waits. Stream has the socket-like calls the
// shim maps to: Read, Write, CloseWrite, Close, Abort, deadlines and
// readiness.
//
// It is the top of the core: it imports core/wire, core/wait and
// core/verbs, and no transport or provider; callers hand it a Transport.
package mux
