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
// never enters this copy's Go runtime, which has no threads there and
// would hang. Precisely:
//   - Before the fork (fork_prepare, in the parent, where the runtime
//     runs), every accelerated connection the child inherits is switched
//     to kernel TCP with the peer's help, without losing or duplicating a
//     byte (shim/forkswitch.go): after fork(), all of them; after
//     posix_spawn and vfork, those with an fd lacking FD_CLOEXEC (what an
//     exec keeps). Parent and child then share plain kernel sockets: the
//     kernel counts the holders, so the parent closing its copy ends
//     nothing; exec keeps them working. Each is counted as
//     fork-exec-decline.
//   - Listeners the child inherits become group listeners (shim/fork.go):
//     their connections are claimed by whichever process first uses the
//     accepted fd (deferred acceptance, shim/deferred_accept.go).
//   - The child runs a private copy of this library, which the interposer
//     loads from a memfd on the child's first need (preload/c/core.c,
//     docs/preload.md "Fork children"), with the parent's load-time
//     environment: a fresh runtime, whose Go tables start empty and adopt
//     the CANDIDATE fds it is called on (listeners, deferred connections).
//
// Exit. The library's destructor (fork.c) calls shim.Process.Exit in the
// process that loaded this copy (never in a fork child of it), and so does
// exit_drain, which the interposer calls from _exit/_Exit: streams are
// closed and drained for up to two seconds, because bytes a coalescing
// stream holds would otherwise die with the process.
//
// Signals: the runtime runs with asynchronous preemption off (godebug.conf,
// compiled in by the Makefile): it sends no SIGURG, and its threads keep
// SIGURG blocked (the interposer loads it with the program's signals held),
// so a process-directed SIGURG reaches a program thread. The shim's
// blocking calls sleep on futexes without a timeout (restarted by the
// kernel after an SA_RESTART handler) and keep their deadlines with Go
// timers (shim/block.go); the interposer turns handlers that ran into
// EINTR or a restart as the kernel would (preload/c/sigcount.c).
//
// Protected descriptors: the Go runtime's poller fds, the log file, the
// eventfds of socket wakeups and every descriptor of the shm provider
// (memfds, eventfds, side-channel sockets, epoll sets; reported through
// shm.FDHook) are PROTECTED in the interposer's table (shim/protect.go),
// so a program that closes descriptors it did not open (close_range over
// everything) leaves its accelerated connections working.
package main
