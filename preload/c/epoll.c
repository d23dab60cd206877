/*
 * epoll.c - epoll_create, epoll_create1, epoll_ctl, epoll_wait, epoll_pwait,
 * epoll_pwait2.
 *
 * epoll_ctl goes to the core when the epoll fd or the target fd is
 * CANDIDATE or MANAGED: the core tracks interest lists that hold its
 * sockets (a CANDIDATE registered now may be MANAGED later) and marks the
 * epoll fd MANAGED when its waits need emulating. epoll_wait on an epoll fd
 * that is not MANAGED is the kernel's, untouched. On a MANAGED one:
 *   1. the core reports what is ready now (no sleeping beyond its spin
 *      budget); if anything is, that is the result;
 *   2. otherwise the kernel epoll_pwait(2) sleeps on the epoll fd (where the
 *      core registered its doorbells) with the caller's timeout and mask;
 *   3. the core rewrites what the kernel returned (doorbells into socket
 *      events); nothing left means sleep again for the time left.
 */
#include "shim.h"
#include "sigcount.h"

SDP_EXPORT int epoll_create(int size)
{
	int fd = sdp_real.epoll_create(size);
	if (fd >= 0)
		sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
	return fd;
}

SDP_EXPORT int epoll_create1(int flags)
{
	int fd = sdp_real.epoll_create1(flags);
	if (fd >= 0)
		sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
	return fd;
}

static SDP_COLD int epoll_ctl_slow(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (sdp_passthrough())
		return sdp_real.epoll_ctl(epfd, op, fd, ev);
	int se = sdp_fd_state(epfd), sf = sdp_fd_state(fd);
	if (se == SDPSHIM_FD_PROTECTED || sf == SDPSHIM_FD_PROTECTED)
		return (int)sdp_fail(EBADF);
	/* A CANDIDATE fd may be the first use of a connection a fork child
	 * inherited (deferred acceptance): the child's core loads for it, or
	 * the socket would sit in the kernel set while its bytes go to a
	 * stream. */
	if (!(sf == SDPSHIM_FD_CANDIDATE ? sdp_core_want() : sdp_core_ready()))
		return sdp_real.epoll_ctl(epfd, op, fd, ev);
	int r = SDP_CORE_CALL(sdp_core.epoll_ctl(epfd, op, fd, ev));
	return r == SDPSHIM_PASS ? sdp_real.epoll_ctl(epfd, op, fd, ev) : (int)sdp_result(r, 0);
}

SDP_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (likely(sdp_fd_plain(epfd) && sdp_fd_plain(fd)))
		return sdp_real.epoll_ctl(epfd, op, fd, ev);
	return epoll_ctl_slow(epfd, op, fd, ev);
}

/* One kernel wait of the emulation loop: epoll_pwait2 with the time left
 * when the caller used it (nanoseconds), else epoll_pwait in milliseconds
 * rounded up. */
static int sdp_epoll_kernel(int epfd, struct epoll_event *ev, int max, int64_t deadline, int forever, int ns,
			    const sigset_t *mask)
{
	int64_t left = 0;
	if (!forever) {
		left = deadline - sdp_now_ns();
		if (left < 0)
			left = 0;
	}
	if (ns) {
		struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
		return sdp_real.epoll_pwait2(epfd, ev, max, forever ? NULL : &ts, mask);
	}
	int64_t ms = (left + 999999) / 1000000;
	return sdp_real.epoll_pwait(epfd, ev, max, forever ? -1 : (int)(ms > 0x7fffffff ? 0x7fffffff : ms), mask);
}

static void epoll_disarm(int epfd, struct epoll_event *ev, int max)
{
	(void)SDP_CORE_CALL(sdp_core.epoll_wait(epfd, ev, max, SDPSHIM_EPOLL_DISARM, -1));
}

/* epoll_wait on a MANAGED epoll fd. timeout_ns < 0 waits forever.
 *
 * The program's signals are held only around the kernel sleep (and the
 * core's calls between its sleeps), where epoll_pwait2's mask lets them in
 * exactly as the kernel would. While the core first looks (and polls for
 * its budget) they are not: a call that finds events, the common case of
 * a busy loop, makes no sigprocmask call. A handler that ran meanwhile is
 * seen in the trampoline's count (sigcount.h) before sleeping: epoll_wait
 * fails with EINTR after any handler, SA_RESTART or not (signal(7)). */
static int epoll_sleep_held(int epfd, struct epoll_event *ev, int max, int64_t deadline, int forever, int ns,
			    const sigset_t *mask);

static int epoll_fast_held(int epfd, struct epoll_event *ev, int max, int64_t deadline, int forever, int ns,
			   const sigset_t *mask, uint32_t gen);

static SDP_COLD int epoll_engine(int epfd, struct epoll_event *ev, int max, int64_t timeout_ns, int ns,
				 const sigset_t *mask)
{
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	int forever = timeout_ns < 0;
	int64_t deadline = forever ? 0 : sdp_now_ns() + timeout_ns;
	uint32_t gen = 0;
	/* No poll budget for a wait with a signal mask of its own: a signal
	 * the mask unblocks must end it, and only the kernel's wait applies
	 * the mask. */
	int spin = timeout_ns != 0 && mask == NULL;
	int fast = sdp_epoll_fast_look(epfd, ev, max, spin, deadline, &mark, &gen);
	if (fast > 0)
		return fast;
	if (fast == 0) { /* the interposer's own wait (epollfast.c) */
		sigset_t old;
		sdp_signals_hold(&old);
		if (timeout_ns != 0 && sdp_sig_since(&mark) != SDP_SIG_NONE) {
			sdp_signals_release(&old);
			return (int)sdp_fail(EINTR);
		}
		int r = epoll_fast_held(epfd, ev, max, deadline, forever, ns, mask ? mask : &old, gen);
		int err = errno;
		sdp_signals_release(&old);
		errno = err;
		return r;
	}
	/* -1: the core may poll for its budget first; -2 (zero timeout): not. */
	int r = SDP_CORE_CALL(sdp_core.epoll_wait(epfd, ev, max, spin ? -1 : -2, timeout_ns));
	if (r != 0 && r != SDPSHIM_PASS)
		return (int)sdp_result(r, 0);
	sigset_t old;
	sdp_signals_hold(&old);
	if (r == 0 && timeout_ns != 0 && sdp_sig_since(&mark) != SDP_SIG_NONE) {
		/* A handler ran while the core polled: the kernel's sleep
		 * would have ended with EINTR. */
		epoll_disarm(epfd, ev, max);
		sdp_signals_release(&old);
		return (int)sdp_fail(EINTR);
	}
	if (mask == NULL)
		mask = &old;
	if (r == SDPSHIM_PASS)
		r = sdp_epoll_kernel(epfd, ev, max, deadline, forever, ns, mask);
	else
		r = epoll_sleep_held(epfd, ev, max, deadline, forever, ns, mask);
	int err = errno;
	sdp_signals_release(&old);
	errno = err;
	return r;
}

/* The sleeps of the engine, with the program's signals held; mask is the
 * one to sleep with (the caller's, or the thread's own). The core armed
 * the set for this sleep (its 0 answer); a result > 0 disarms it, leaving
 * otherwise must (SDPSHIM_EPOLL_DISARM). */
static int epoll_sleep_held(int epfd, struct epoll_event *ev, int max, int64_t deadline, int forever, int ns,
			    const sigset_t *mask)
{
	for (;;) {
		int k = sdp_epoll_kernel(epfd, ev, max, deadline, forever, ns, mask);
		if (k < 0) {
			int err = errno;
			epoll_disarm(epfd, ev, max);
			errno = err;
			return k;
		}
		int r = SDP_CORE_CALL(sdp_core.epoll_wait(epfd, ev, max, k, -1));
		if (r == SDPSHIM_PASS)
			return k;
		if (r != 0)
			return (int)sdp_result(r, 0);
		if (!forever && sdp_now_ns() >= deadline) {
			epoll_disarm(epfd, ev, max);
			return 0;
		}
	}
}

/* The sleeps of a wait the interposer answers alone, signals held as in
 * epoll_sleep_held; when the core takes over (epollfast.c), its loop. */
static int epoll_fast_held(int epfd, struct epoll_event *ev, int max, int64_t deadline, int forever, int ns,
			   const sigset_t *mask, uint32_t gen)
{
	for (;;) {
		struct sdpshim_eset *t = sdp_epoll_sleep_begin(epfd, gen);
		int left = 0, n = SDPSHIM_PASS;
		if (t != NULL) {
			int k = sdp_epoll_kernel(epfd, ev, max, deadline, forever, ns, mask);
			int err = errno;
			sdp_epoll_sleep_end(t);
			errno = err;
			if (k < 0)
				return k;
			n = sdp_epoll_fast_after(epfd, ev, max, k, &left, &gen);
		}
		if (n == SDPSHIM_PASS) {
			/* As after the core's own sleep, with what the kernel
			 * returned that the core must still filter. */
			int r = SDP_CORE_CALL(sdp_core.epoll_wait(epfd, ev, max, left, -1));
			if (r == SDPSHIM_PASS)
				return sdp_epoll_kernel(epfd, ev, max, deadline, forever, ns, mask);
			if (r != 0)
				return (int)sdp_result(r, 0);
			if (!forever && sdp_now_ns() >= deadline) {
				epoll_disarm(epfd, ev, max);
				return 0;
			}
			/* The core published the set again: the next sleep is the
			 * interposer's, counted as a sleeper of the snapshot, which
			 * a change of the set kicks (shim/epoll.go, changedLocked);
			 * the core's own sleep only while there is none. */
			n = sdp_epoll_fast_look(epfd, ev, max, 0, 0, NULL, &gen);
			if (n > 0)
				return n;
			if (n == 0)
				continue;
			return epoll_sleep_held(epfd, ev, max, deadline, forever, ns, mask);
		}
		if (n > 0 || (!forever && sdp_now_ns() >= deadline))
			return n;
	}
}

/* Route for a wait on epfd: 0 kernel, 1 engine, -1 EBADF. */
static int sdp_epoll_route(int epfd, int max)
{
	int s = sdp_fd_state(epfd);
	if (s == SDPSHIM_FD_UNMANAGED || sdp_passthrough())
		return 0;
	if (s == SDPSHIM_FD_PROTECTED)
		return -1;
	return s == SDPSHIM_FD_MANAGED && max > 0 && sdp_core_ready();
}

SDP_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (likely(sdp_fd_plain(epfd)))
		return sdp_real.epoll_wait(epfd, ev, max, timeout);
	switch (sdp_epoll_route(epfd, max)) {
	case 0:
		return sdp_real.epoll_wait(epfd, ev, max, timeout);
	case -1:
		return (int)sdp_fail(EBADF);
	}
	return epoll_engine(epfd, ev, max, timeout < 0 ? -1 : timeout * 1000000LL, 0, NULL);
}

SDP_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	if (likely(sdp_fd_plain(epfd)))
		return sdp_real.epoll_pwait(epfd, ev, max, timeout, mask);
	switch (sdp_epoll_route(epfd, max)) {
	case 0:
		return sdp_real.epoll_pwait(epfd, ev, max, timeout, mask);
	case -1:
		return (int)sdp_fail(EBADF);
	}
	return epoll_engine(epfd, ev, max, timeout < 0 ? -1 : timeout * 1000000LL, 0, mask);
}

SDP_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *t, const sigset_t *mask)
{
	if (likely(sdp_fd_plain(epfd)))
		return sdp_real.epoll_pwait2(epfd, ev, max, t, mask);
	switch (sdp_epoll_route(epfd, max)) {
	case 0:
		return sdp_real.epoll_pwait2(epfd, ev, max, t, mask);
	case -1:
		return (int)sdp_fail(EBADF);
	}
	if (t != NULL && (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000L))
		return (int)sdp_fail(EINVAL);
	return epoll_engine(epfd, ev, max, t == NULL ? -1 : (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec, 1, mask);
}
