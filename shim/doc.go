// Package shim holds socket semantics for accelerated sockets: the fd
// table mirror, the socket state machine (created, connecting, negotiated
// as accelerated or fallback, half-closed, closed), blocking and
// nonblocking calls, MSG_PEEK/MSG_WAITALL/MSG_DONTWAIT, shutdown, socket
// options, poll/select/epoll emulation, fallback decisions with their
// reason codes, and the one table that maps errors to errno. Settings live
// in shim/config.
package shim
