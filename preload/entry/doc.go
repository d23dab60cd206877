//go:debug containermaxprocs=0

// Command entry is libsdpshim-core.so, the Go core of sdpshim: built with
// -buildmode=c-shared and dlopen()ed by the C interposer (preload/c) on a
// process's first TCP socket. It implements the C ABI of
// preload/c/sdpshim_core.h: exports.go holds one //export wrapper per
// entry point, each a few lines that convert C types and call package
// shim; host.go adapts struct sdpshim_host to shim.Host; fork.c is the C
// part (fork_child, and the exit hook); probe.c compiles the probe
// functions of probes/c, which probes.go fires (host.go's table is a
// shim.Observer through it). exports.map is the linker version script
// that keeps every other symbol local.
//
// Fork children. fork_child (fork.c) runs in the child of a fork() and
// never enters the Go runtime, which has no threads there and would hang.
// Precisely:
//   - Before the fork (fork_prepare, in the parent, where the runtime
//     runs), every accelerated connection the child inherits is switched
//     to kernel TCP with the peer's help, without losing or duplicating a
//     byte (shim/forkswitch.go): after fork(), all of them; after
//     posix_spawn and vfork, those with an fd lacking FD_CLOEXEC (what an
//     exec keeps). Parent and child then share plain kernel sockets: the
//     kernel counts the holders, so the parent closing its copy ends
//     nothing; exec keeps them working. Each is counted as
//     fork-exec-decline.
//   - The interposer sets every inherited fd UNMANAGED and turns the core
//     off in the child: new connections it makes are not accelerated
//     (reason fork-exec-decline, counted by the interposer).
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
// Protected descriptors: the Go runtime's poller fds, the log file, the
// eventfds of socket wakeups and every descriptor of the shm provider
// (memfds, eventfds, side-channel sockets, epoll sets; reported through
// shm.FDHook) are PROTECTED in the interposer's table (shim/protect.go),
// so a program that closes descriptors it did not open (close_range over
// everything) leaves its accelerated connections working.
package main
