/*
 * proc.c - fork, posix_spawn, posix_spawnp, and vfork where there is no
 * assembly version (vfork_x86_64.S).
 *
 * The core's fork hooks run only when the core is running. The child of a
 * fork never enters the parent's Go runtime (its other threads are gone and
 * it hangs): sdp_core_atfork_child() calls the core's C-only fork_child
 * hook, forgets the MANAGED and PROTECTED fd states and leaves the child a
 * private copy of the core to load on first need (core.c): one the
 * parent made ahead or at a later fork, or the child's own
 * (sdp_core_fork_copy).
 * posix_spawn children exec at once and run none of our code.
 *
 * vfork: the child borrows its parent's memory and thread (TLS included)
 * until it execs or exits. vfork sets sdp_vfork_child in the child and
 * restores it in the parent, and every interposed call in the child only
 * passes through: no core, no table write. It must not be a C function that
 * calls the real vfork, since the child would return through, and the next
 * call would overwrite, the frame the parent still has to return through.
 */
#include "shim.h"
#include "tenant.h"

#include <sys/syscall.h>
#include <unistd.h>

SDP_EXPORT pid_t fork(void)
{
	if (sdp_passthrough()) {
		/* Inside a hook (a signal handler that forks) or a vfork child:
		 * only what keeps the child alive. */
		sdp_core_fork_stack();
		pid_t pid = sdp_real.fork();
		if (pid == 0)
			sdp_altstack_check();
		return pid;
	}
	int keep = -1, mine = -1; /* the request pair of the connections kept (forkkeep.c) */
	int counted = 0;          /* sdp_core_fork_copy counted this fork in */
	if (sdp_core_ready()) {
		int saved = errno;
		if (sdp_core_fork_needed())
			SDP_CORE_DO(sdp_core.fork_prepare(SDPSHIM_FORK));
		keep = sdp_fork_keep_take(&mine);
		/* After the hook: the copy takes a few ms, which must not delay
		 * withdrawing the listeners the child shares. */
		sdp_core_fork_copy();
		sdp_core_fork_stack();
		counted = 1;
		errno = saved;
	}
	sdp_fork_keep_forking(); /* a child holding kept connections forks in turn */
	pid_t pid = sdp_real.fork();
	if (pid != 0 && counted)
		sdp_core_fork_done();
	if (pid == 0) {
		sdp_tenant_forget();
		sdp_core_atfork_child(keep, mine);
	} else if (keep >= 0) {
		/* The child's end is the child's alone: the core sees it close
		 * when the child and whoever inherits it from there are gone. */
		int saved = errno;
		sdp_fd_set(keep, SDPSHIM_FD_UNMANAGED);
		syscall(SYS_close, keep);
		errno = saved;
	}
	return pid;
}

typedef int spawn_fn(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
		     char *const[], char *const[]);

static int spawn(spawn_fn *real, pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (sdp_passthrough() || !sdp_core_ready() || !sdp_core_fork_needed())
		return real(pid, path, fa, attr, argv, envp);
	int saved = errno;
	SDP_CORE_DO(sdp_core.fork_prepare(SDPSHIM_SPAWN));
	errno = saved;
	return real(pid, path, fa, attr, argv, envp);
}

SDP_EXPORT int posix_spawn(pid_t *restrict pid, const char *restrict path, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *restrict attr, char *const argv[restrict],
			   char *const envp[restrict])
{
	return spawn(sdp_real.posix_spawn, pid, path, fa, attr, argv, envp);
}

SDP_EXPORT int posix_spawnp(pid_t *restrict pid, const char *restrict file, const posix_spawn_file_actions_t *fa,
			    const posix_spawnattr_t *restrict attr, char *const argv[restrict],
			    char *const envp[restrict])
{
	return spawn(sdp_real.posix_spawnp, pid, file, fa, attr, argv, envp);
}

/* Around vfork: its child may exec with inherited sockets, as after
 * posix_spawn. Called by vfork_x86_64.S with nothing to preserve. */
SDP_HIDDEN void sdp_vfork_prepare(void);

void sdp_vfork_prepare(void)
{
	if (sdp_passthrough() || !sdp_core_ready() || !sdp_core_fork_needed())
		return;
	int saved = errno;
	SDP_CORE_DO(sdp_core.fork_prepare(SDPSHIM_SPAWN));
	errno = saved;
}

#if defined(__x86_64__)
/* Error exit of vfork_x86_64.S (no child exists then). */
SDP_HIDDEN long sdp_vfork_error(int err);
long sdp_vfork_error(int err) { return sdp_fail(err); }
#else
/* Elsewhere vfork is a fork whose child only passes through: the same
 * contract for the child (exec or _exit), at the cost of copying the page
 * tables. */
SDP_EXPORT pid_t vfork(void)
{
	sdp_vfork_prepare();
	pid_t pid = sdp_real.fork();
	if (pid == 0)
		sdp_vfork_child = 1;
	return pid;
}
#endif

/* _exit and _Exit end the process without exit()'s handlers, so without
 * the core's destructor either: the accelerated streams would lose what
 * they still hold (bytes a flow controller buffered, a FIN), which the
 * kernel delivers for a plain socket after the process is gone. A fork
 * server's child typically ends this way right after its last write.
 * The core drains first (bounded), unless this thread is inside the core
 * or the interposer (a signal handler that interrupted it: the core's
 * locks may be held here), or is a vfork child (its parent's memory). */
static void sdp_exit_drain(void)
{
	if (!sdp_passthrough() && sdp_core_ready())
		SDP_CORE_DO(sdp_core.exit_drain());
}

SDP_EXPORT void _exit(int status)
{
	sdp_exit_drain();
	for (;;) {
		syscall(SYS_exit_group, status);
		syscall(SYS_exit, status);
	}
}

SDP_EXPORT void _Exit(int status) { _exit(status); }
