/*
 * sigcount.h - which of the program's signal handlers ran on this thread, so
 * a blocking call the core serves returns EINTR, or restarts, as the
 * kernel's would (sigcount.c).
 *
 * The kernel interrupts a blocking recv, send, accept or connect when a
 * handler runs: with SA_RESTART it restarts the call, without it the call
 * fails with EINTR (signal(7)). Under the shim such a call may spin in user space, where a
 * handler runs without ending anything: the interposer therefore installs
 * the program's handlers behind a trampoline that counts, per thread, the
 * handlers that ran and those among them without SA_RESTART.
 */
#ifndef SDPSHIM_SIGNAL_H
#define SDPSHIM_SIGNAL_H

/* A thread's counts at some moment. */
struct sdp_sigmark {
	unsigned int ran;	/* handlers run */
	unsigned int norestart; /* of which without SA_RESTART */
};

/* What ran since a mark. */
enum sdp_sigsince {
	SDP_SIG_NONE = 0,      /* no handler of the program's */
	SDP_SIG_RESTART = 1,   /* only handlers with SA_RESTART */
	SDP_SIG_INTERRUPT = 2, /* a handler without SA_RESTART */
};

/* The calling thread's counts now. Async-signal-safe. */
SDP_HIDDEN void sdp_sig_mark(struct sdp_sigmark *m);
/* What ran on the calling thread since m. */
SDP_HIDDEN enum sdp_sigsince sdp_sig_since(const struct sdp_sigmark *m);

/* Whether a wait's budget poll is over: the program's deadline
 * (sdp_now_ns, direct.h; 0: none) passed, or a handler ran since m (NULL:
 * not looked at). The kernel's wait that follows then answers as it
 * would have: the timeout, EINTR. */
static inline int sdp_poll_over(int64_t deadline, const struct sdp_sigmark *m)
{
	return (deadline != 0 && sdp_now_ns() >= deadline) || (m != NULL && sdp_sig_since(m) != SDP_SIG_NONE);
}

/* What the kernel holds for sig (the trampoline where the program's
 * handler is behind one, unlike the program's sigaction), without the
 * blocking of signals the program's sigaction needs around its table.
 * Async-signal-safe once the process called sigaction. */
SDP_HIDDEN int sdp_sig_kernel(int sig, struct sigaction *cur);
/* 1 when sa (as the kernel holds it) is the counting trampoline. */
SDP_HIDDEN int sdp_sig_counted(const struct sigaction *sa);
/* In a handler of sig (SIGCHLD): when the thread is one of the Go
 * runtime's, which accept SIGCHLD whatever the program's threads do,
 * blocks sig in it, sends sig again to the process (a program thread takes
 * it) and returns 1; 0 on a program thread (core.c). */
SDP_HIDDEN int sdp_sig_away_from_runtime(int sig, siginfo_t *info, void *ucv);

#endif
