/*
 * forkkeep.c - connections kept accelerated across fork().
 *
 * A fork child cannot enter its parent's Go runtime, so the parent used to
 * switch every connection the child inherits to kernel TCP before fork()
 * (shim/forkswitch.go). Most children never touch them: redis's BGSAVE
 * child writes its file and exits, a worker pool's child opens its own
 * connections, a fork-exec child loses close-on-exec fds at exec. So the
 * core keeps a direct connection whose fds are all close-on-exec
 * accelerated (host->fork_keep) and hands the child a request socket
 * instead. The connection's state is in the area (its cursors, locks and
 * sleep words), so the child goes on over it where it can, with no Go
 * runtime, and the switch happens only for a call it cannot answer:
 *
 *   - the fds the parent managed wait in the child as SDP_FD_INHERITED;
 *     closing one closes it and tells the parent's core (a one-way
 *     message), which ends a connection its own program closed meanwhile
 *     once no child holds it (shim/forkkeep.go);
 *   - the data calls, fcntl's flags, getsockname, getpeername, poll and
 *     select go on over the parent's handle (sdp_route_io,
 *     sdp_fork_kept_continues): its copy here is made the child's at its
 *     first use (sdp_direct_inherit: no bells, whose numbers are the
 *     parent's; its sleepers are rung on the socket), and the peer and
 *     the parent see nothing of it. A switch the parent's core begins
 *     (its program forks, passes the fd, exits) shows in the area, and
 *     the child's next call resolves;
 *   - any other call on one of them (epoll, shutdown, socket options,
 *     dup, ...; any thread: sdp_fd_state sees the state), or a call the
 *     handle does not take (MSG_OOB), sends the request, with a pipe's write end, and waits
 *     until the parent's core has switched every connection kept at that
 *     fork (it answers with a byte) - what fork_prepare did before - then the
 *     fds are plain here, as they always were in a child, and the call
 *     goes on;
 *   - so does the child's own core, before it loads (core.c).
 *
 * When the parent is gone (the request cannot be sent, or it went before
 * it answered), a connection it switched before it went (its exit does,
 * for those a child may hold: the area says so) is plain; nothing can
 * switch any other, so the child resets it (the peer sees ECONNRESET,
 * then the kernel socket's end) rather than leave a socket on which
 * nothing would ever arrive. A grandchild inherits the same pending
 * request; the first fork of such a child tells the parent's core, since
 * a close in one process of the family no longer means the family let go.
 */
#include "shim.h"
#include "direct.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/futex.h>

/* The request end of the fork about to happen (parent, between
 * fork_prepare and fork()). */
static int sdp_keep_next = -1, sdp_keep_mine = -1;

void sdp_fork_keep(int fd, int mine)
{
	__atomic_store_n(&sdp_keep_mine, mine, __ATOMIC_SEQ_CST);
	__atomic_store_n(&sdp_keep_next, fd, __ATOMIC_SEQ_CST);
}

int sdp_fork_keep_take(int *mine)
{
	*mine = __atomic_exchange_n(&sdp_keep_mine, -1, __ATOMIC_SEQ_CST);
	return __atomic_exchange_n(&sdp_keep_next, -1, __ATOMIC_SEQ_CST);
}

/* In a child: the request end (-1: nothing kept) and where its
 * resolution stands. */
static int sdp_keep_fd = -1;
enum { KEEP_NONE, KEEP_PENDING, KEEP_RESOLVING, KEEP_DONE };
static int sdp_keep_state = KEEP_NONE;
/* The thread resolving: a signal handler it runs must not wait for itself. */
static SDP_TLS int sdp_keep_resolver;

/* The wait for the parent's switch: each connection's is bounded by the
 * core (3 s, in parallel), and this by a margin over that. */
#define KEEP_WAIT_MS 10000

#define KEEP_REQUEST "SDPkeep1"
/* One-way messages: an inherited fd closed (its number follows, 4
 * bytes), and this child forked (shim/forkkeep.go). */
#define KEEP_DROP "SDPdrop1"
#define KEEP_FORK "SDPfork1"
/* This process, or the child it descends from, forked since the keep. */
static int sdp_keep_forked;

int sdp_fork_keep_child(int fd, int mine)
{
	if (fd < 0)
		return 0;
	if (mine >= 0) {
		sdp_fd_set(mine, SDPSHIM_FD_UNMANAGED);
		syscall(SYS_close, mine);
	}
	/* MANAGED fds wait; the parent's PROTECTED ones are plain here. (A
	 * request end this process inherited is still pending only while
	 * its core never loaded, and then it forks with no new one.) */
	static const signed char to[SDP_FD_STATES] = {-1, -1, SDP_FD_INHERITED, SDPSHIM_FD_UNMANAGED, -1, -1, -1, SDP_FD_UNSEEN};
	sdp_fd_recast(to, SDPSHIM_FD_MANAGED);
	sdp_keep_fd = fd;
	__atomic_store_n(&sdp_keep_forked, 0, __ATOMIC_RELAXED);
	sdp_fd_set(fd, SDPSHIM_FD_PROTECTED);
	__atomic_store_n(&sdp_keep_state, KEEP_PENDING, __ATOMIC_RELEASE);
	return 1;
}

/* Asks the parent's core to switch the kept connections; 1 once it says
 * they are, 0 when it cannot be asked or does not answer. */
static int keep_request(int fd)
{
	int p[2];
	if (syscall(SYS_pipe2, p, O_CLOEXEC) != 0)
		return 0;
	char msg[] = KEEP_REQUEST;
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof msg - 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[1], sizeof(int));
	long r;
	do
		r = syscall(SYS_sendmsg, fd, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	syscall(SYS_close, p[1]);
	int ok = 0;
	if (r == (long)iov.iov_len) {
		/* The core writes a byte when done. The end without one (read
		 * 0) is the parent's death: a request queued but never read
		 * releases the pipe when the parent's end goes. */
		int64_t deadline = sdp_now_ns() + (int64_t)KEEP_WAIT_MS * 1000000;
		for (;;) {
			int64_t left = deadline - sdp_now_ns();
			if (left <= 0)
				break;
			struct pollfd pf = {.fd = p[0], .events = POLLIN};
			struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
			long n = syscall(SYS_ppoll, &pf, 1, &ts, NULL, 8);
			if (n < 0 && errno == EINTR)
				continue;
			if (n > 0) {
				char b;
				ok = syscall(SYS_read, p[0], &b, 1) == 1;
			}
			break;
		}
	}
	syscall(SYS_close, p[0]);
	if (!ok)
		sdp_log(SDP_LOG_DEBUG, "fork child: no answer from the parent to the switch request (%s)",
			r < 0 ? strerror(errno) : "none");
	return ok;
}

/* fd's state as the caller sees it: an inherited fd is a plain one. */
static int seen_state(int fd)
{
	int s = fd >= 0 ? sdp_fd_state_raw(fd) : SDPSHIM_FD_UNMANAGED;
	return s == SDP_FD_INHERITED ? SDPSHIM_FD_UNMANAGED : s;
}

int sdp_fork_kept_resolve(int fd)
{
	int st = __atomic_load_n(&sdp_keep_state, __ATOMIC_ACQUIRE);
	/* A vfork child (the parent's memory), the core's own calls and the
	 * resolver's only pass through. */
	if (sdp_keep_resolver || st == KEEP_NONE || sdp_passthrough())
		return seen_state(fd);
	if (st == KEEP_PENDING &&
	    __atomic_compare_exchange_n(&sdp_keep_state, &st, KEEP_RESOLVING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		int saved = errno;
		sdp_keep_resolver = 1;
		sdp_guard_enter();
		/* Without an answer, a connection the parent switched before it
		 * went is plain; any other could never be switched now. */
		if (!keep_request(sdp_keep_fd)) {
			int n = sdp_direct_reset_all();
			if (n > 0)
				sdp_log(SDP_LOG_WARN, "fork child: the parent did not switch the connections it kept for "
						      "this child; %d reset", n);
		}
		sdp_direct_forget_all();
		sdp_epoll_forget_all();
		static const signed char plain[SDP_FD_STATES] = {-1, -1, -1, -1, SDPSHIM_FD_UNMANAGED, -1, -1, -1};
		unsigned long n = sdp_fd_recast(plain, SDP_FD_INHERITED);
		sdp_fd_set(sdp_keep_fd, SDPSHIM_FD_UNMANAGED);
		syscall(SYS_close, sdp_keep_fd);
		sdp_keep_fd = -1;
		sdp_fork_decline_count(n);
		sdp_guard_leave();
		sdp_keep_resolver = 0;
		__atomic_store_n(&sdp_keep_state, KEEP_DONE, __ATOMIC_RELEASE);
		syscall(SYS_futex, &sdp_keep_state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
		errno = saved;
	} else {
		/* Another thread resolves: past the resolver's own bound, the
		 * call goes on (its fd is plain then, or about to be). */
		sdp_futex_wait_while(&sdp_keep_state, KEEP_RESOLVING,
				     sdp_now_ns() + (int64_t)(KEEP_WAIT_MS + 1000) * 1000000);
	}
	return seen_state(fd);
}

int sdp_fork_kept_continues(int fd)
{
	if (__atomic_load_n(&sdp_keep_state, __ATOMIC_ACQUIRE) != KEEP_PENDING || sdp_keep_resolver)
		return 0;
	return sdp_direct_inherit(fd);
}

/* Tells the parent's core something that needs no answer: a message on
 * the request end, never waited for (a full buffer loses it; the parent
 * then ends the connection when the request end closes). */
static void keep_tell(const char what[8], int fd)
{
	char msg[12];
	memcpy(msg, what, 8);
	int32_t v = fd;
	memcpy(msg + 8, &v, sizeof v);
	int saved = errno;
	(void)syscall(SYS_sendto, sdp_keep_fd, msg, fd >= 0 ? sizeof msg : 8, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
	errno = saved;
}

void sdp_fd_drop_inherited(int fd)
{
	sdp_direct_attach(fd, NULL); /* the parent's handle must never serve a later fd of that number */
	sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
	/* The parent's core holds a connection its program closed while
	 * this child holds it; it ends it once the child let go of every fd
	 * of it. Once this family forked, a close here says nothing about
	 * the other processes: the request end's close does. */
	if (__atomic_load_n(&sdp_keep_state, __ATOMIC_ACQUIRE) == KEEP_PENDING &&
	    !__atomic_load_n(&sdp_keep_forked, __ATOMIC_RELAXED))
		keep_tell(KEEP_DROP, fd);
}

void sdp_fork_keep_forking(void)
{
	if (__atomic_load_n(&sdp_keep_state, __ATOMIC_ACQUIRE) != KEEP_PENDING ||
	    __atomic_exchange_n(&sdp_keep_forked, 1, __ATOMIC_RELAXED))
		return;
	keep_tell(KEEP_FORK, -1);
}
