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
 * (sdp_core_fork_copy). A fork libc makes on its own (daemon()) goes
 * through the same halves from pthread_atfork handlers, registered at the
 * first core load.
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

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One fork's state between its two halves, for the forking thread. */
struct sdp_fork {
	int keep, mine; /* the request pair of the connections kept (forkkeep.c) */
	int counted;    /* sdp_core_fork_copy counted this fork in */
	int armed;      /* set by the atfork prepare handler for its other halves */
};

static void fork_before(struct sdp_fork *f)
{
	f->keep = f->mine = -1;
	f->counted = 0;
	if (sdp_core_ready()) {
		int saved = errno;
		if (sdp_core_fork_needed())
			SDP_CORE_DO(sdp_core.fork_prepare(SDPSHIM_FORK));
		f->keep = sdp_fork_keep_take(&f->mine);
		/* After the hook: the copy takes a few ms, which must not delay
		 * withdrawing the listeners the child shares. */
		sdp_core_fork_copy();
		f->counted = 1;
		errno = saved;
	}
	sdp_fork_keep_forking(); /* a child holding kept connections forks in turn */
}

static void fork_parent(struct sdp_fork *f)
{
	if (f->counted)
		sdp_core_fork_done();
	if (f->keep >= 0) {
		/* The child's end is the child's alone: the core sees it close
		 * when the child and whoever inherits it from there are gone. */
		int saved = errno;
		sdp_fd_set(f->keep, SDPSHIM_FD_UNMANAGED);
		syscall(SYS_close, f->keep);
		errno = saved;
	}
}

static void fork_child(struct sdp_fork *f)
{
	sdp_tenant_forget();
	sdp_core_atfork_child(f->keep, f->mine);
}

/* Set while this thread is in the interposed fork() (or the vfork that
 * forks, below); a fork without it is one libc makes on its own
 * (daemon()), which the atfork handlers below take through the same
 * halves. Thread-local, so a fork child reads the
 * value of the thread that forked. */
static SDP_TLS int sdp_forking;
static SDP_TLS struct sdp_fork sdp_fork_libc;

SDP_EXPORT pid_t fork(void)
{
	if (sdp_passthrough())
		return sdp_real.fork(); /* the atfork handlers see a fork inside a hook */
	struct sdp_fork f;
	fork_before(&f);
	sdp_forking = 1;
	pid_t pid = sdp_real.fork();
	sdp_forking = 0;
	if (pid == 0)
		fork_child(&f);
	else
		fork_parent(&f);
	return pid;
}

static void atfork_prepare(void)
{
	sdp_core_fork_stack();
	if (sdp_forking)
		return;
	if (sdp_passthrough()) {
		/* Inside a hook, where the core is not entered again: the child
		 * keeps the parent's state, runtime included. */
		sdp_core_fork_inherit_all();
		return;
	}
	fork_before(&sdp_fork_libc);
	sdp_fork_libc.armed = 1;
}

static void atfork_parent(void)
{
	if (!sdp_forking && sdp_fork_libc.armed) {
		sdp_fork_libc.armed = 0;
		fork_parent(&sdp_fork_libc);
	}
}

static void atfork_child(void)
{
	sdp_altstack_check();
	if (!sdp_forking && sdp_fork_libc.armed) {
		sdp_fork_libc.armed = 0;
		fork_child(&sdp_fork_libc);
	}
}

static pthread_once_t sdp_fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }
void sdp_fork_register(void) { pthread_once(&sdp_fork_once, fork_register); }

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
	sdp_forking = 1; /* the atfork handlers leave this fork to us */
	pid_t pid = sdp_real.fork();
	sdp_forking = 0;
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
