/* forkhold.h - a pre-fork server's shape, shared by the soak
 * (bench/soak/csrc/soak.c) and the durability test's server
 * (tests/testdata/durable.c): a fork child holds the process's
 * descriptors, its listener among them, as a pre-fork server's workers
 * share its listener, so that a shim cannot tell which process will use
 * a connection. Header-only; included by path in the repository
 * (bench/programs embeds it for the harnesses that build elsewhere). */
#ifndef SDPSHIM_BENCH_FORKHOLD_H
#define SDPSHIM_BENCH_FORKHOLD_H

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Forks the holder, which waits until this process dies (and dies with
 * it). Returns 0 in this process, -1 when the fork failed. */
static int hold_in_child(void)
{
	pid_t parent = getpid(), child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		for (;;)
			pause();
	}
	return 0;
}

#endif
