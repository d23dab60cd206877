/*
 * fork.c - the C part of the core: fork_child, which runs in a fork child
 * and must never enter the Go runtime, and the exit hook.
 */
#define _GNU_SOURCE 1
#include "sdpshim_core.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "_cgo_export.h"

/* The pid that ran sdpshim_core_init successfully; 0 before. */
int sdp_core_pid;
/* Set in a fork child: the runtime is not ours to enter there. */
static volatile int sdp_core_forked;

/* In a fork() child, before fork() returns: async-signal-safe, no Go.
 * The inherited connections are kernel TCP already (fork_prepare switched
 * them, shim/forkswitch.go); the interposer sets every inherited fd
 * UNMANAGED after this returns. */
__attribute__((visibility("default"))) void sdpshim_core_fork_child(void) { sdp_core_forked = 1; }

/* Set once the streams were drained for the process's end. */
static int sdp_core_drained;

/* At the end of the process that runs the core: drain the streams, once.
 * Never in a fork child of it (its runtime has no threads), nor before
 * init succeeded. */
static void sdp_core_drain(void)
{
	if (sdp_core_forked || sdp_core_pid == 0 || sdp_core_pid != (int)syscall(SYS_getpid))
		return;
	if (__atomic_exchange_n(&sdp_core_drained, 1, __ATOMIC_ACQ_REL))
		return;
	sdpshimExit();
}

/* exit(), returning from main. */
__attribute__((destructor)) static void sdp_core_fini(void) { sdp_core_drain(); }

/* _exit() and _Exit(): the interposer calls this first. */
__attribute__((visibility("default"))) void sdpshim_core_exit_drain(void) { sdp_core_drain(); }
