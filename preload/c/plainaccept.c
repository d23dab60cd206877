/*
 * plainaccept.c - accepts the interposer decides alone.
 *
 * An accept() on a listener the core registered asks the core what the
 * new connection is: accelerated when its connector offered it (an offer
 * the core holds, or a deferral record in the record directory), else kernel
 * TCP, counted as peer-not-shimmed. For a server whose clients are not
 * shimmed every answer is the second one, and each costs a runtime entry:
 * about 0.1 ms in a postgres postmaster, which forks a backend per
 * connection right after, with the runtime's threads it woke still
 * running. So the core tells the interposer when nobody can have offered
 * a connection (host->accept_*):
 *
 *   - the listeners it registered, by fd and SO_COOKIE (a later socket
 *     with that number is another one);
 *   - how many offers it holds, answered and not yet claimed or dropped
 *     (set before each answer goes out), or may be reading from its
 *     rendezvous socket (set before it takes a connection off it);
 *   - that socket: a committed offer, sent before its connector's
 *     connect(), waits there until the core reads it;
 *   - a state of the record directory (the run directory's records/:
 *     device, inode, modification time) in which it held no deferral
 *     record, read when the directory had been
 *     unchanged for longer than any timestamp granularity, so that a
 *     record written after that read moves the time.
 *
 * A connector's offer is answered or queued on the rendezvous socket, and
 * its record written, before its connect(). So an accept on a marked
 * listener that finds the rendezvous socket with nothing queued, then no
 * offer held, and the record directory as the core last saw it without
 * records is a
 * connection nobody offered: it stays on kernel TCP here, counted (in
 * fallback[] and accept_plain), fired through the fallback probe and
 * logged at debug level, without entering the core. Anything else asks
 * the core, as before. The core writes the directory's state under a
 * sequence count (odd while it writes); the interposer reads around it.
 */
#include "shim.h"
#include "../../probes/c/probe.h"

#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

/* Listener cookies by fd (sdp_fd_ptr_slot; the value, not a pointer). */
static struct sdp_fd_ptrs pa_dir;
static unsigned long pa_marked; /* 0 lets every accept skip the table */
static uint32_t pa_held;
uint64_t sdp_plain_accepts;

/* The run directory's quiet state. */
static struct {
	uint32_t seq; /* odd while the core writes */
	uint32_t quiet;
	uint64_t dev, ino;
	int64_t sec, nsec;
	int rvfd;
	char dir[PATH_MAX];
} pa;

void sdp_plain_listener(int fd, uint64_t cookie)
{
	void **slot = sdp_fd_ptr_slot(&pa_dir, fd, cookie != 0);
	if (slot == NULL)
		return;
	void *old = __atomic_exchange_n(slot, (void *)(uintptr_t)cookie, __ATOMIC_SEQ_CST);
	if (old == NULL && cookie != 0)
		__atomic_fetch_add(&pa_marked, 1, __ATOMIC_RELAXED);
	else if (old != NULL && cookie == 0)
		__atomic_fetch_sub(&pa_marked, 1, __ATOMIC_RELAXED);
}

void sdp_plain_held(uint32_t n) { __atomic_store_n(&pa_held, n, __ATOMIC_SEQ_CST); }

void sdp_plain_quiet(const char *dir, uint64_t dev, uint64_t ino, int64_t sec, int64_t nsec, int rvfd)
{
	/* Writers take the count from even to odd (one at a time). */
	uint32_t s = __atomic_load_n(&pa.seq, __ATOMIC_RELAXED);
	for (;;) {
		if ((s & 1) == 0 &&
		    __atomic_compare_exchange_n(&pa.seq, &s, s + 1, 1, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
		sdp_cpu_relax();
		s = __atomic_load_n(&pa.seq, __ATOMIC_RELAXED);
	}
	uint32_t quiet = 0;
	if (dir != NULL && rvfd >= 0 && strlen(dir) < sizeof pa.dir &&
	    (pa.dir[0] == 0 || strcmp(pa.dir, dir) == 0)) { /* one run directory a process */
		if (pa.dir[0] == 0)
			strcpy(pa.dir, dir);
		__atomic_store_n(&pa.dev, dev, __ATOMIC_RELAXED);
		__atomic_store_n(&pa.ino, ino, __ATOMIC_RELAXED);
		__atomic_store_n(&pa.sec, sec, __ATOMIC_RELAXED);
		__atomic_store_n(&pa.nsec, nsec, __ATOMIC_RELAXED);
		__atomic_store_n(&pa.rvfd, rvfd, __ATOMIC_RELAXED);
		quiet = 1;
	}
	__atomic_store_n(&pa.quiet, quiet, __ATOMIC_RELAXED);
	__atomic_store_n(&pa.seq, s + 2, __ATOMIC_RELEASE);
}

/* Whether the connection fd, just accepted on lfd, is one nobody offered. */
static int nobody_offered(int lfd)
{
	if (__atomic_load_n(&pa_marked, __ATOMIC_RELAXED) == 0)
		return 0;
	void **slot = sdp_fd_ptr_slot(&pa_dir, lfd, 0);
	uint64_t want = slot ? (uint64_t)(uintptr_t)__atomic_load_n(slot, __ATOMIC_ACQUIRE) : 0;
	if (want == 0)
		return 0;
	if (__atomic_load_n(&pa_held, __ATOMIC_RELAXED) != 0)
		return 0; /* offers held: the core decides (looked at again after the poll below) */
	uint32_t s1 = __atomic_load_n(&pa.seq, __ATOMIC_ACQUIRE);
	if ((s1 & 1) || !__atomic_load_n(&pa.quiet, __ATOMIC_RELAXED))
		return 0;
	uint64_t dev = __atomic_load_n(&pa.dev, __ATOMIC_RELAXED), ino = __atomic_load_n(&pa.ino, __ATOMIC_RELAXED);
	int64_t sec = __atomic_load_n(&pa.sec, __ATOMIC_RELAXED), nsec = __atomic_load_n(&pa.nsec, __ATOMIC_RELAXED);
	int rvfd = __atomic_load_n(&pa.rvfd, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (__atomic_load_n(&pa.seq, __ATOMIC_RELAXED) != s1)
		return 0;
	/* The socket first, then the count: the core counts a connection
	 * before it takes it off the socket's backlog, so a committed offer
	 * is seen in one or the other. */
	struct pollfd pfd = {.fd = rvfd, .events = POLLIN};
	struct timespec zero = {0, 0};
	if (syscall(SYS_ppoll, &pfd, 1, &zero, NULL, 0) != 0 || __atomic_load_n(&pa_held, __ATOMIC_SEQ_CST) != 0)
		return 0;
	uint64_t cookie = 0;
	socklen_t n = sizeof cookie;
	if (syscall(SYS_getsockopt, lfd, SOL_SOCKET, SO_COOKIE, &cookie, &n) != 0 || cookie != want)
		return 0;
	/* pa.dir is written once, before the first quiet state. */
	struct stat st;
	if (syscall(SYS_newfstatat, AT_FDCWD, pa.dir, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	return (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino && (int64_t)st.st_mtim.tv_sec == sec &&
	       (int64_t)st.st_mtim.tv_nsec == nsec;
}

int sdp_plain_accept(int lfd, int fd)
{
	int saved = errno;
	int plain = nobody_offered(lfd);
	if (plain) {
		__atomic_fetch_add(&sdp_plain_accepts, 1, __ATOMIC_RELAXED);
		sdp_fallback_note(SDPSHIM_REASON_NOT_SHIMMED, fd);
		sdp_log(SDP_LOG_DEBUG, "connection stays on kernel TCP: fd %d accepted on fd %d, reason=peer-not-shimmed "
				       "(nobody offered it)", fd, lfd);
	}
	errno = saved;
	return plain;
}

void sdp_plain_forget(void)
{
	if (__atomic_load_n(&pa_marked, __ATOMIC_RELAXED) != 0)
		sdp_fd_ptr_clear_all(&pa_dir);
	__atomic_store_n(&pa_marked, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pa_held, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&pa.quiet, 0, __ATOMIC_RELAXED);
	/* A parent's thread may have forked in the middle of a write: the
	 * count would stay odd, and the child's own core would wait on it. */
	__atomic_store_n(&pa.seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sdp_plain_accepts, 0, __ATOMIC_RELAXED);
}
