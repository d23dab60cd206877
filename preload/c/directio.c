/*
 * directio.c - the interposer's side of the direct data path (direct.h):
 * the table of connection handles by fd, which the core fills
 * (host->direct_attach), and the data calls on them, made here without
 * entering the core: one table lookup, the copy, and, only when a peer
 * sleeps or this thread must, one system call.
 *
 * A call the handle does not cover (MSG_OOB, control data, a socket the
 * core marked slow: shutdown(SHUT_RD), bytes written before the verdict
 * still in the core, ...) answers SDPSHIM_PASS here and goes to the core,
 * which implements it over the same functions.
 */
#include "shim.h"
#include "sigcount.h"
#include "direct.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

/* Handles by fd (sdp_fd_ptr_slot: read without a lock). */
static struct sdp_fd_ptrs sdp_dt;
/* Attached handles in the process: 0 lets every call skip the table. */
static unsigned long sdp_dt_count;

static struct sdp_dconn **dt_slot(int fd, int make) { return (struct sdp_dconn **)sdp_fd_ptr_slot(&sdp_dt, fd, make); }

/* host->direct_attach: fd is carried by conn from now on (NULL: no longer). */
void sdp_direct_attach(int fd, void *conn)
{
	struct sdp_dconn **slot = dt_slot(fd, conn != NULL);
	if (slot == NULL)
		return;
	struct sdp_dconn *old = __atomic_exchange_n(slot, (struct sdp_dconn *)conn, __ATOMIC_SEQ_CST);
	if (old == NULL && conn != NULL)
		__atomic_fetch_add(&sdp_dt_count, 1, __ATOMIC_RELAXED);
	else if (old != NULL && conn == NULL)
		__atomic_fetch_sub(&sdp_dt_count, 1, __ATOMIC_RELAXED);
}

/* Fork child (async-signal-safe): no handle of the parent's is the
 * child's. The chunks stay mapped (copies); every slot is cleared. */
void sdp_direct_forget_all(void)
{
	if (__atomic_load_n(&sdp_dt_count, __ATOMIC_RELAXED) == 0)
		return;
	sdp_fd_ptr_clear_all(&sdp_dt);
	__atomic_store_n(&sdp_dt_count, 0, __ATOMIC_RELAXED);
}

int sdp_direct_reset_all(void)
{
	int n = 0;
	if (__atomic_load_n(&sdp_dt_count, __ATOMIC_RELAXED) == 0)
		return 0;
	int end = __atomic_load_n(&sdp_dt.end, __ATOMIC_RELAXED);
	for (int fd = 0; fd < end; fd++) {
		struct sdp_dconn **slot = dt_slot(fd, 0);
		struct sdp_dconn *c = slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
		/* One the parent switched before it went is plain already. */
		if (c != NULL && !__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE) && !sdp_dconn_switched(c)) {
			sdp_dconn_reset(c);
			n++;
		}
	}
	return n;
}

/* The handle carrying fd, held (users + 1) until sdp_direct_put, or NULL.
 * The core detaches by setting closed, then waits for users to drop to 0
 * before it unmaps: announce-then-check on both sides (SEQ_CST). */
static struct sdp_dconn *sdp_direct_get(int fd)
{
	if (__atomic_load_n(&sdp_dt_count, __ATOMIC_RELAXED) == 0)
		return NULL;
	struct sdp_dconn **slot = dt_slot(fd, 0);
	struct sdp_dconn *c = slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
	if (c == NULL)
		return NULL;
	__atomic_fetch_add(&c->users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_sub(&c->users, 1, __ATOMIC_SEQ_CST);
		return NULL;
	}
	return c;
}

void sdp_direct_put(struct sdp_dconn *c) { __atomic_fetch_sub(&c->users, 1, __ATOMIC_SEQ_CST); }

int sdp_direct_inherit(int fd)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c == NULL)
		return 0;
	int ok = !__atomic_load_n(&c->slow, __ATOMIC_ACQUIRE) && !sdp_dconn_switching(c);
	if (ok && !__atomic_load_n(&c->inherited, __ATOMIC_ACQUIRE)) {
		/* The bells' fds are the parent's numbers, which this process
		 * may have closed or reused: rings go on the socket. The file
		 * status flags are shared with the parent, which may have
		 * changed them since the fork. Threads racing here store the
		 * same values. */
		__atomic_store_n(&c->bells, NULL, __ATOMIC_RELEASE);
		long fl = syscall(SYS_fcntl, fd, F_GETFL);
		if (fl >= 0)
			__atomic_store_n(&c->nonblock, (fl & O_NONBLOCK) != 0, __ATOMIC_RELAXED);
		__atomic_store_n(&c->inherited, 1, __ATOMIC_RELEASE);
	}
	sdp_direct_put(c);
	return ok;
}

int sdp_direct_inherited_sockopt(int fd, int set, int level, int name, const void *val, socklen_t len)
{
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_KEEPALIVE:
			return 1;
		case SO_ERROR: /* a reset on the area is a data call's ECONNRESET */
		case SO_TYPE:
		case SO_DOMAIN:
		case SO_PROTOCOL:
		case SO_ACCEPTCONN:
		case SO_RCVBUF: /* read only: the kernel's sizes are the program's; set, the area's window */
		case SO_SNDBUF:
			return !set;
		case SO_RCVTIMEO:
		case SO_SNDTIMEO:
			if (!set)
				return 1;
			if (val == NULL || len < (socklen_t)sizeof(struct timeval))
				return 0;
			struct timeval tv;
			memcpy(&tv, val, sizeof tv);
			if (tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
				return 0; /* the kernel's EDOM comes from the switch's path */
			struct sdp_dconn *c = sdp_direct_get(fd);
			if (c == NULL)
				return 0;
			int64_t ns = (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
			__atomic_store_n(name == SO_RCVTIMEO ? &c->rcvtimeo : &c->sndtimeo, ns, __ATOMIC_RELAXED);
			sdp_direct_put(c);
			return 1;
		}
		return 0;
	}
	if (level != IPPROTO_TCP)
		return 0;
	switch (name) {
	case TCP_KEEPIDLE:
	case TCP_KEEPINTVL:
	case TCP_KEEPCNT:
	case TCP_USER_TIMEOUT:
	case TCP_INFO:
		return 1;
	case TCP_NODELAY:
		/* The kernel socket of a connection a fork kept has it on (its
		 * rings must not wait: the parent took the program's settings
		 * off before the fork, shim/tcpopts.go): setting it on is what
		 * the program already has; off goes through the switch, and a
		 * read says on. */
		if (!set)
			return 1;
		int on = 0;
		if (val != NULL && len >= (socklen_t)sizeof on)
			memcpy(&on, val, sizeof on);
		return on != 0;
	}
	return 0;
}

void sdp_direct_nonblock(int fd, int on)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c != NULL) {
		__atomic_store_n(&c->nonblock, on != 0, __ATOMIC_RELAXED);
		sdp_direct_put(c);
	}
}

struct sdp_dconn *sdp_direct_poll_get(int fd)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	/* A drain that read the start of the peer's switch record hands the
	 * socket to the core, which runs the switch. */
	if (c != NULL && (__atomic_load_n(&c->slow, __ATOMIC_ACQUIRE) != 0 || __atomic_load_n(&c->npush, __ATOMIC_ACQUIRE) != 0)) {
		sdp_direct_put(c);
		return NULL;
	}
	return c;
}

static void count(uint64_t *ctr, uint64_t n)
{
	/* Per-process statistics: a plain load and store (no locked
	 * instruction on the data path); threads racing may lose a count. */
	__atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* One data call on c: recv (send == 0) or send of iov[0..cnt), flags as
 * the program passed them. The result as a hook's: bytes, -errno, or
 * SDPSHIM_PASS for the core. Kernel semantics: a blocking send moves
 * everything, a blocking recv returns once something arrived (MSG_WAITALL:
 * everything), O_NONBLOCK and MSG_DONTWAIT never sleep, SO_RCVTIMEO and
 * SO_SNDTIMEO end a sleep with EAGAIN, a signal handler without SA_RESTART
 * ends it with EINTR (or the progress), ECONNRESET is reported once. */
static int is_slow(struct sdp_dconn *c, int send)
{
	if (unlikely(__atomic_load_n(&c->inherited, __ATOMIC_RELAXED)) && sdp_dconn_switching(c))
		return 1; /* the parent's core switches it: the fork child resolves (forkkeep.c) */
	return (__atomic_load_n(&c->slow, __ATOMIC_ACQUIRE) & (send ? SDP_DSLOW_SEND : SDP_DSLOW_RECV)) != 0;
}

/* The longest sleep of a fork child's data call before it looks at the
 * socket for the peer's end itself. */
#define INHERITED_SLEEP_NS 50000000LL

static long direct_io(struct sdp_dconn *c, int send, const struct iovec *iov, int cnt, int flags)
{
	const int known = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | (send ? 0 : MSG_PEEK | MSG_WAITALL | MSG_CMSG_CLOEXEC);
	if ((flags & ~known) || is_slow(c, send))
		return SDPSHIM_PASS;
	int f = 0;
	if ((flags & MSG_DONTWAIT) || __atomic_load_n(&c->nonblock, __ATOMIC_RELAXED))
		f |= SDP_D_NONBLOCK;
	if (!send && (flags & MSG_PEEK))
		f |= SDP_D_PEEK;
	int waitall = !send && (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
	uint64_t len = 0, total = 0;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	int64_t tmo = __atomic_load_n(send ? &c->sndtimeo : &c->rcvtimeo, __ATOMIC_RELAXED);
	int64_t deadline = tmo > 0 ? sdp_now_ns() + tmo : 0;
	struct sdp_sigmark mark;
	sdp_sig_mark(&mark);
	for (;;) {
		struct sdp_dsleep sl;
		long r = send ? sdp_dconn_sendv(c, iov, cnt, total, f, &sl) : sdp_dconn_recvv(c, iov, cnt, total, f, &sl);
		if (r > 0) {
			total += (uint64_t)r;
			if (!(send || waitall) || total == len)
				break;
			continue;
		}
		if (r == 0 || r != SDP_D_WAIT) {
			/* An end (EOF, EPIPE, reset) the core made for a switch to
			 * kernel TCP is the core's to answer. */
			if (total == 0 && r <= 0 && is_slow(c, send))
				return SDPSHIM_PASS;
			if (r == -ECONNRESET) {
				if (__atomic_exchange_n(&c->errseen, 1, __ATOMIC_RELAXED))
					r = send ? -EPIPE : 0; /* reported once: then EOF, EPIPE */
			}
			if (r == -EAGAIN && send)
				count(&c->nospace, 1);
			if (total > 0)
				break;
			return r;
		}
		/* Sleep: the announcement is made, the word read before the
		 * last check. closed is looked at after the announcement: the
		 * core's detach wakes only the sleepers announced before its
		 * look (sdp_dconn_wake_mine). */
		if (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST)) {
			sdp_dconn_woke(c, &sl);
			return total > 0 ? (long)total : SDPSHIM_PASS;
		}
		int64_t left = -1;
		if (deadline) {
			left = deadline - sdp_now_ns();
			if (left <= 0) {
				sdp_dconn_woke(c, &sl);
				if (total > 0)
					break;
				return -EAGAIN;
			}
		}
		/* A fork child's sleep is bounded: the peer's death is marked in
		 * the area by the parent's switch watcher, which may be gone. */
		int inh = __atomic_load_n(&c->inherited, __ATOMIC_RELAXED) != 0;
		if (inh && (left < 0 || left > INHERITED_SLEEP_NS))
			left = INHERITED_SLEEP_NS;
		/* So is the first sleep of a connection the switch watcher does not
		 * watch yet, after which it does (direct.h, SDP_DWATCH_*). */
		int unwatched = !inh && __atomic_load_n(&c->watch, __ATOMIC_RELAXED) == SDP_DWATCH_LATER;
		if (unwatched && (left < 0 || left > SDP_DWATCH_FIRST_NS))
			left = SDP_DWATCH_FIRST_NS;
		struct sdpshim_wait w = {.kind = SDPSHIM_WAIT_FUTEX, .word = sl.word, .val = sl.val, .timeout_ns = left};
		int64_t slept = inh || unwatched ? sdp_now_ns() : 0;
		long e = sdp_wait_step(&w, &total, len, &mark);
		sdp_dconn_woke(c, &sl);
		if (inh && sdp_now_ns() - slept >= INHERITED_SLEEP_NS)
			(void)sdp_dconn_drain(c, __atomic_load_n(&c->ring_fd, __ATOMIC_RELAXED)); /* its end: peer_gone */
		if (unwatched && sdp_now_ns() - slept >= SDP_DWATCH_FIRST_NS)
			sdp_dconn_watch_now(c);
		if (e != 0)
			return e;
		if (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST) || is_slow(c, send)) /* the core's now */
			return total > 0 ? (long)total : SDPSHIM_PASS;
	}
	if (send) {
		count(&c->sent, total);
		count(&c->send_calls, 1);
	} else if (!(flags & MSG_PEEK)) {
		count(&c->received, total);
		count(&c->recv_calls, 1);
	}
	return (long)total;
}

long sdp_direct_shut_wr(int fd)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c == NULL)
		return SDPSHIM_PASS;
	long r = SDPSHIM_PASS;
	if (!is_slow(c, 1)) {
		sdp_dconn_fin(c);
		r = 0;
	}
	sdp_direct_put(c);
	return r;
}

long sdp_direct_recv(int fd, void *buf, size_t n, int flags)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c == NULL)
		return SDPSHIM_PASS;
	struct iovec v = {.iov_base = buf, .iov_len = n};
	long r = direct_io(c, 0, &v, 1, flags);
	sdp_direct_put(c);
	return r;
}

long sdp_direct_send(int fd, const void *buf, size_t n, int flags)
{
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c == NULL)
		return SDPSHIM_PASS;
	struct iovec v = {.iov_base = (void *)buf, .iov_len = n};
	long r = direct_io(c, 1, &v, 1, flags);
	sdp_direct_put(c);
	return r;
}

long sdp_direct_msg(int send, int fd, struct msghdr *m, int flags)
{
	if (m->msg_iovlen > UIO_MAXIOV || (send && m->msg_controllen > 0))
		return SDPSHIM_PASS;
	struct sdp_dconn *c = sdp_direct_get(fd);
	if (c == NULL)
		return SDPSHIM_PASS;
	long r = direct_io(c, send, m->msg_iov, (int)m->msg_iovlen, flags);
	sdp_direct_put(c);
	if (r >= 0 && !send) { /* as the kernel's TCP recvmsg */
		m->msg_flags = 0;
		m->msg_controllen = 0;
		m->msg_namelen = 0;
	}
	return r;
}
