/*
 * wait.c - calling the core's data hooks: results into errno and SIGPIPE,
 * and the SDPSHIM_WAIT loop (sleep in the kernel as the hook says, call
 * again for what is left, add the progress up).
 */
#include "shim.h"
#include "sigcount.h"

#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

long sdp_fail(int err)
{
	errno = err;
	return -1;
}

long sdp_result(long r, int sigpipe)
{
	if (r >= 0)
		return r;
	if (r < -4095) /* a core bug: an impossible result */
		r = -EIO;
	if (r == -EPIPE && sigpipe)
		raise(SIGPIPE);
	errno = (int)-r;
	return -1;
}

void sdp_signals_hold(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	static const int keep[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT};
	for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
		sigdelset(&all, keep[i]);
	if (pthread_sigmask(SIG_BLOCK, &all, old) != 0)
		pthread_sigmask(SIG_BLOCK, NULL, old);
}

void sdp_signals_release(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

int sdp_wait(const struct sdpshim_wait *w)
{
	struct timespec ts, *tp = NULL;
	if (w->timeout_ns >= 0) {
		ts.tv_sec = w->timeout_ns / 1000000000LL;
		ts.tv_nsec = w->timeout_ns % 1000000000LL;
		tp = &ts;
	}
	if (w->kind == SDPSHIM_WAIT_FUTEX) {
		/* A blocking recv is a cancellation point; so is this sleep. */
		int type;
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
		long r = syscall(SYS_futex, w->word, FUTEX_WAIT, w->val, tp, NULL, 0);
		int err = errno;
		pthread_setcanceltype(type, NULL);
		return r < 0 && err == EINTR ? EINTR : 0;
	}
	if (w->kind == SDPSHIM_WAIT_FD) {
		struct pollfd p = {.fd = w->fd, .events = w->events};
		int r = sdp_real.ppoll(&p, 1, tp, NULL);
		return r < 0 && errno == EINTR ? EINTR : 0;
	}
	sched_yield(); /* unknown kind: never spin hot */
	return 0;
}

/* ---- hook calls with the SDPSHIM_WAIT loop ------------------------------------ */

/* The result of a call that moved total bytes before its last hook result
 * r: progress wins over a later error, as in the kernel. */
static long sdp_progress(long r, uint64_t total)
{
	if (total == 0)
		return r;
	return r >= 0 ? (long)total + r : (long)total;
}

/* Sleeps for a hook that answered SDPSHIM_WAIT; adds its progress to
 * *total (never beyond len). 0 to call again, else the result to return.
 * Signals, as the kernel has them for a blocking socket call: a handler
 * of the program's without SA_RESTART that ran since *mark (while the hook
 * spun, or during the sleep) ends the call with EINTR (or the progress so
 * far); handlers with SA_RESTART let it go on (the kernel restarts the
 * untimed sleep itself); an interrupted sleep that no counted handler
 * explains (one installed past the interposer) ends it with EINTR. One
 * difference is left: with SO_RCVTIMEO/SO_SNDTIMEO set the kernel never
 * restarts, the shim does (its deadline is a timer, the sleep untimed):
 * such a call returns at its timeout instead of at the signal. */
long sdp_wait_step(const struct sdpshim_wait *w, uint64_t *total, uint64_t len, struct sdp_sigmark *mark)
{
	uint64_t done = w->done;
	if (done > len - *total)
		done = len - *total;
	*total += done;
	if (sdp_sig_since(mark) == SDP_SIG_INTERRUPT)
		return *total ? (long)*total : -EINTR;
	int e = sdp_wait(w);
	enum sdp_sigsince s = sdp_sig_since(mark);
	if (s == SDP_SIG_INTERRUPT || (e != 0 && s == SDP_SIG_NONE))
		return *total ? (long)*total : -(e ? e : EINTR);
	if (s == SDP_SIG_RESTART)
		sdp_sig_mark(mark);
	return 0;
}

/* After the direct path passed on fd: 1 when the call goes to the kernel
 * instead of the core. An inherited fd (a fork child going on over its
 * parent's area, sdp_route_io) has the call the direct path did not take
 * resolved first: the parent's core switches it, and the fd is plain. */
static int sdp_direct_only(int fd)
{
	if (unlikely(sdp_fd_state_raw(fd) == SDP_FD_INHERITED)) {
		sdp_fork_kept_resolve(fd);
		return 1;
	}
	return unlikely(!sdp_core_ready()); /* another thread resolved it meanwhile */
}

long sdp_core_recv(int fd, void *buf, size_t n, int flags)
{
	long d = sdp_direct_recv(fd, buf, n, flags);
	if (d != SDPSHIM_PASS)
		return d;
	if (sdp_direct_only(fd))
		return SDPSHIM_PASS;
	uint64_t total = 0;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdpshim_wait w = {0};
		long r = SDP_CORE_CALL(sdp_core.recv(fd, (char *)buf + total, n - total, flags, &w));
		if (r != SDPSHIM_WAIT)
			return r == SDPSHIM_PASS && total == 0 ? r : sdp_progress(r, total);
		long e = sdp_wait_step(&w, &total, n, &mark);
		if (e != 0)
			return e;
	}
}

long sdp_core_send(int fd, const void *buf, size_t n, int flags)
{
	long d = sdp_direct_send(fd, buf, n, flags);
	if (d != SDPSHIM_PASS)
		return d;
	if (sdp_direct_only(fd))
		return SDPSHIM_PASS;
	uint64_t total = 0;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdpshim_wait w = {0};
		long r = SDP_CORE_CALL(sdp_core.send(fd, (char *)buf + total, n - total, flags, &w));
		if (r != SDPSHIM_WAIT)
			return r == SDPSHIM_PASS && total == 0 ? r : sdp_progress(r, total);
		long e = sdp_wait_step(&w, &total, n, &mark);
		if (e != 0)
			return e;
	}
}

long sdp_core_sendfile(int o, int i, off_t *off, size_t n)
{
	uint64_t total = 0;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdpshim_wait w = {0};
		long r = SDP_CORE_CALL(sdp_core.sendfile(o, i, off, n - total, &w));
		if (r != SDPSHIM_WAIT)
			return r == SDPSHIM_PASS && total == 0 ? r : sdp_progress(r, total);
		long e = sdp_wait_step(&w, &total, n, &mark);
		if (e != 0)
			return e;
	}
}

long sdp_core_splice(int i, loff_t *oi, int o, loff_t *oo, size_t n, unsigned int f)
{
	uint64_t total = 0;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdpshim_wait w = {0};
		long r = SDP_CORE_CALL(sdp_core.splice(i, oi, o, oo, n - total, f, &w));
		if (r != SDPSHIM_WAIT)
			return r == SDPSHIM_PASS && total == 0 ? r : sdp_progress(r, total);
		long e = sdp_wait_step(&w, &total, n, &mark);
		if (e != 0)
			return e;
	}
}

/* A copy of a msghdr whose iovecs skip the bytes already moved; its iovec
 * array is mmap()ed (rare path; async-signal-safe) and built once. */
struct sdp_msg_rest {
	struct msghdr m;
	struct iovec *iov;
	size_t maplen;
};

static int sdp_msg_rest_build(struct sdp_msg_rest *c, const struct msghdr *orig, uint64_t skip)
{
	if (c->iov == NULL) {
		c->maplen = (orig->msg_iovlen ? orig->msg_iovlen : 1) * sizeof(struct iovec);
		void *m = mmap(NULL, c->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -ENOMEM;
		c->iov = m;
	}
	size_t k = 0;
	for (size_t i = 0; i < orig->msg_iovlen; i++) {
		struct iovec v = orig->msg_iov[i];
		if (skip >= v.iov_len) {
			skip -= v.iov_len;
			continue;
		}
		v.iov_base = (char *)v.iov_base + skip;
		v.iov_len -= skip;
		skip = 0;
		c->iov[k++] = v;
	}
	c->m = *orig;
	c->m.msg_iov = c->iov;
	c->m.msg_iovlen = k;
	c->m.msg_control = NULL; /* went with the first bytes */
	c->m.msg_controllen = 0;
	return 0;
}

static uint64_t sdp_msg_len(const struct msghdr *m)
{
	uint64_t n = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

/* recvmsg (send == 0) or sendmsg through the core, with the wait loop. */
static long core_msg(int send, int fd, struct msghdr *m, int flags)
{
	long d = sdp_direct_msg(send, fd, m, flags);
	if (d != SDPSHIM_PASS)
		return d;
	if (sdp_direct_only(fd))
		return SDPSHIM_PASS;
	struct sdp_msg_rest rest = {.iov = NULL};
	struct msghdr *cur = m;
	uint64_t total = 0, len = 0;
	long r;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdpshim_wait w = {0};
		r = send ? SDP_CORE_CALL(sdp_core.sendmsg(fd, cur, flags, &w))
			 : SDP_CORE_CALL(sdp_core.recvmsg(fd, cur, flags, &w));
		if (r != SDPSHIM_WAIT) {
			r = r == SDPSHIM_PASS && total == 0 ? r : sdp_progress(r, total);
			break;
		}
		if (w.done > 0 && len == 0)
			len = sdp_msg_len(m);
		if ((r = sdp_wait_step(&w, &total, len, &mark)) != 0)
			break;
		if (total > 0 && (r = sdp_msg_rest_build(&rest, m, total)) != 0) {
			r = sdp_progress(r, total);
			break;
		}
		cur = total > 0 ? &rest.m : m;
	}
	if (cur != m && !send)
		m->msg_flags |= rest.m.msg_flags;
	if (rest.iov != NULL)
		munmap(rest.iov, rest.maplen);
	return r;
}

long sdp_core_recvmsg(int fd, struct msghdr *m, int flags) { return core_msg(0, fd, m, flags); }
long sdp_core_sendmsg(int fd, const struct msghdr *m, int flags) { return core_msg(1, fd, (struct msghdr *)m, flags); }

