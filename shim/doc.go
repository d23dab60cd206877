// Package shim holds socket semantics for accelerated sockets: the fd
// table mirror, the socket state machine (created, connecting, negotiated
// as accelerated or fallback, half-closed, closed), blocking and
// nonblocking calls, MSG_PEEK/MSG_WAITALL/MSG_DONTWAIT, shutdown, socket
// options, poll/select/epoll emulation, fallback decisions with their
// reason codes, and the one table that maps errors to errno. Settings live
// in shim/config.
//
// A Process (process.go) is the shim of one process: preload/entry's
// exported hooks (the C ABI of preload/c/sdpshim_core.h) call its methods,
// one per hook, with C memory already viewed as Go slices. Where things
// are:
//
//	host.go       the ABI's constants, Host (the interposer's table), Wait
//	socket.go     Socket and its state machine; fdtable.go the fd mirror
//	listen.go     listen/accept, the rendezvous Handler (acceptor side)
//	connect.go    connect (connector side); settle.go the verdict
//	channels.go   channel ends: one channel per process pair, stream ids
//	establish.go  building a channel (transport, flow control)
//	recv.go send.go sendfile.go   the data path
//	block.go wake.go attend.go    blocking: spin, then a kernel sleep
//	poll.go epoll.go              readiness, poll and epoll emulation
//	fdops.go options.go           close, dup, fcntl/ioctl, options, shutdown
//	fork.go exit.go protect.go    fork, process exit, protected fds
//	errno.go      the one errno table
//
// Channel setup (channels.go, connect.go, listen.go). The connector's
// first connection to a process makes a socketpair and passes one end in
// its rendezvous offer; both sides run core setup (statusbyte.Open or
// slidingwindow.Open) over it, the acceptor inside its Handler, the
// connector on a goroutine while it waits for the answer. Later
// connections between the same two processes, in either direction, name
// the channel by its token and reuse it (SDPSHIM_CHANNEL=per-connection:
// a new channel each time, closed with its stream). For every connection
// the acceptor opens the stream in its Handler and answers with the
// stream's id; the connector takes that id from the streams its end of the
// channel announced, once the acceptor's verdict (sent by its accept())
// says accepted.
//
// Blocking (block.go, wake.go, attend.go). A call that cannot go on polls
// its condition for the SDPSHIM_POLL budget, then returns SDPSHIM_WAIT: the
// C thread sleeps in the kernel, in futex(FUTEX_WAIT) on the socket's wake
// word without a timeout, so that signals interrupt or restart it exactly
// as they would a blocking recv. Every event of the stream bumps the word
// (mux.Stream.SetNotify) and wakes registered sleepers; while a thread
// sleeps, the stream is attended (mux.Stream.Attend), which keeps the
// channel's progress goroutines pumping for it. Deadlines (SO_RCVTIMEO,
// SO_SNDTIMEO) are Go timers that ring the word. poll/select sleep with
// an eventfd of their thread and epoll with the set's kick eventfd, which
// the same events write (wake.go); a direct socket's peer rings the
// socket itself or the set's bell (direct.go, bells.go).
package shim
