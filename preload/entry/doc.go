//go:debug containermaxprocs=0

// Command entry is libsdpshim-core.so, the Go core of sdpshim: built with
// -buildmode=c-shared and dlopen()ed by the C interposer (preload/c) on a
// process's first TCP socket. It implements the C ABI of
// preload/c/sdpshim_core.h: exports.go holds one //export wrapper per
// entry point, each a few lines that convert C types and call package
// shim; host.go adapts struct sdpshim_host to shim.Host; fork.c is the C
// part (fork_child, and the exit hook). exports.map is the linker version
// script that keeps every other symbol local.
//
// Fork children. fork_child (fork.c) runs in the child of a fork() and
// never enters the Go runtime, which has no threads there and would hang.
// It does not decline inherited streams through shared memory yet; what
// happens instead, precisely:
//   - The interposer sets every inherited fd UNMANAGED and turns the core
//     off in the child: all its sockets are plain kernel TCP from then on,
//     and new connections it makes are not accelerated (reason
//     fork-exec-decline, counted by the interposer).
//   - An inherited accelerated connection is, in the child, its kernel TCP
//     socket, on which the accelerated peer neither sends nor reads. The
//     parent still owns the stream: as long as the parent keeps its fd
//     open, the connection works through the parent only. What the child
//     writes on its copy reaches the peer's kernel socket and is never
//     read; the child's reads block until the peer closes (then EOF).
//     Closing the copy in the child (what pre-fork servers and exec'ed
//     children with close-on-exec do) has no effect on the connection.
//   - When the parent closes its fd, the stream closes (the peer reads EOF)
//     even though the child's copy of the kernel socket is still open:
//     a server that accepts, forks a worker for the connection and closes
//     its own copy loses the connection. Such servers are issue 5.
//   - Listeners: after fork() the parent unregisters its listeners (a child
//     may accept on them), so later connections to them stay on kernel TCP
//     (shim/fork.go).
//
// Exit. The library's destructor (fork.c) calls shim.Process.Exit in the
// process that loaded the core (never in a fork child): streams are closed
// and drained for up to two seconds, because bytes a coalescing stream
// holds in its send buffer would otherwise die with the process.
//
// Signals: the Go runtime preempts goroutines with SIGURG, and may deliver
// one to a host thread just after that thread left a hook. A timed futex
// or a ppoll sleep returns EINTR after any handled signal (SA_RESTART or
// not), so the shim's blocking calls sleep on futexes without a timeout
// (restarted by the kernel, the runtime's handler has SA_RESTART) and
// keep their deadlines with Go timers (shim/block.go). poll, select and
// epoll_wait over accelerated sockets may still return a spurious EINTR.
//
// Protected descriptors: the Go runtime's poller fds, the log file and the
// eventfds of socket wakeups are PROTECTED in the interposer's table
// (shim/protect.go). The transport's own descriptors (memfds, eventfds and
// sockets of the shm provider) are not: a program that closes descriptors
// it did not open (close_range over everything) ends the channels, and its
// accelerated connections see ECONNRESET.
package main
