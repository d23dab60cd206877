/*
 * fakecore.c - a core written in C for the interposer's tests: it
 * implements the whole ABI of sdpshim_core.h over the kernel socket itself
 * (so bytes stay exactly as on TCP), marks connected sockets MANAGED and
 * exercises every path of the interposer: the SDPSHIM_WAIT loop with partial
 * progress (FD and FUTEX waits), SIGPIPE through -EPIPE, the poll and epoll
 * emulation, PROTECTED fds (a pipe it keeps at fds 100 and 101, evicted on
 * request), the fork hooks.
 *
 * Environment: FAKECORE_LOG (file the events are appended to, one
 * "pid event ..." line each), FAKECORE_MODE (comma-separated: disable, fail,
 * futex, nowait, shortrun: a listen starts a plain run of 2 connections
 * to its port on 127.0.0.1, host->short_run).
 * Only raw system calls: the core must not re-enter the interposer.
 */
#define _GNU_SOURCE 1
#define SDPSHIM_CORE_PROTOTYPES 1
#include "sdpshim_core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SYS(...) syscall(__VA_ARGS__)

static struct sdpshim_host *H;
static char mode[256];
static int pipe_rd = -1, pipe_wr = -1;
static uint32_t futex_word;
static unsigned long n_in, n_out, n_calls, n_waits, n_polls, n_epolls;

static int has_mode(const char *m)
{
	size_t n = strlen(m);
	for (const char *p = mode; (p = strstr(p, m)) != NULL; p += n)
		if ((p == mode || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

static void logf_(const char *fmt, ...)
{
	const char *path = getenv("FAKECORE_LOG");
	if (path == NULL)
		return;
	char line[512];
	int n = snprintf(line, sizeof line, "%d ", (int)SYS(SYS_getpid));
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	int fd = (int)SYS(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		SYS(SYS_write, fd, line, (size_t)n);
		SYS(SYS_close, fd);
	}
}

static int nonblocking(int fd) { return (SYS(SYS_fcntl, fd, F_GETFL) & O_NONBLOCK) != 0; }

/* The protected pipe still works (nobody closed or replaced it). */
static void check_protected(void)
{
	char c = 'p';
	int ok = SYS(SYS_write, pipe_wr, &c, 1) == 1 && SYS(SYS_read, pipe_rd, &c, 1) == 1 && c == 'p';
	logf_("protected %s %d %d", ok ? "ok" : "broken", pipe_rd, pipe_wr);
}

int sdpshim_core_init(struct sdpshim_host *host, char **envp)
{
	(void)envp;
	H = host;
	const char *m = getenv("FAKECORE_MODE");
	snprintf(mode, sizeof mode, "%s", m ? m : "");
	logf_("init abi=%u size=%u shim=%s", host->abi, host->size, host->shim_path);
	if (host->abi != SDPSHIM_CORE_ABI)
		return 4; /* protocol-error (docs/reasons.md) */
	if (has_mode("disable"))
		return SDPSHIM_REASON_BAD_SETTING;
	if (has_mode("fail"))
		return -EIO;
	int p[2];
	if (SYS(SYS_pipe2, p, O_CLOEXEC) == 0) {
		pipe_rd = (int)SYS(SYS_fcntl, p[0], F_DUPFD_CLOEXEC, 100);
		pipe_wr = (int)SYS(SYS_fcntl, p[1], F_DUPFD_CLOEXEC, 100);
		SYS(SYS_close, p[0]);
		SYS(SYS_close, p[1]);
		H->fd_set_state(pipe_rd, SDPSHIM_FD_PROTECTED);
		H->fd_set_state(pipe_wr, SDPSHIM_FD_PROTECTED);
	}
	return 0;
}

__attribute__((destructor)) static void fake_fini(void)
{
	if (H != NULL)
		logf_("stats in=%lu out=%lu calls=%lu waits=%lu polls=%lu epolls=%lu short=%lu", n_in, n_out, n_calls,
		      n_waits, n_polls, n_epolls, (unsigned long)__atomic_load_n(H->short_plain, __ATOMIC_RELAXED));
}

int sdpshim_core_socket(int fd, int domain, int type, int protocol)
{
	logf_("socket %d %d %d %d", fd, domain, type, protocol);
	check_protected();
	return SDPSHIM_FD_CANDIDATE;
}

int sdpshim_core_bind(int fd, struct sockaddr *addr, socklen_t len)
{
	(void)fd, (void)addr, (void)len;
	return SDPSHIM_PASS;
}

int sdpshim_core_listen(int fd, int backlog)
{
	logf_("listen %d", fd);
	long r = SYS(SYS_listen, fd, backlog);
	if (r == 0 && has_mode("shortrun")) {
		struct sockaddr_in a;
		socklen_t al = sizeof a;
		uint8_t lo[4] = {127, 0, 0, 1};
		if (SYS(SYS_getsockname, fd, &a, &al) == 0)
			logf_("shortrun %d", H->short_run(lo, 4, ntohs(a.sin_port), 2));
	}
	return r < 0 ? -errno : 0;
}

int sdpshim_core_accept(int lfd, int fd, struct sockaddr *peer, socklen_t peerlen, int flags)
{
	logf_("accept %d %d family=%d len=%u flags=%d", lfd, fd, peer->sa_family, peerlen, flags);
	return SDPSHIM_FD_MANAGED;
}

int sdpshim_core_connect(int fd, struct sockaddr *addr, socklen_t len, struct sdpshim_wait *w)
{
	(void)w;
	long r = SYS(SYS_connect, fd, addr, len);
	int err = r < 0 ? errno : 0;
	logf_("connect %d %d", fd, err);
	if (err == 0 || err == EINPROGRESS)
		H->fd_set_state(fd, SDPSHIM_FD_MANAGED);
	return -err;
}

/* Fills *w for a wait on fd; FUTEX mode sleeps 1 ms on a word nobody wakes. */
static long wait_for(struct sdpshim_wait *w, int fd, short events, long done)
{
	n_waits++;
	w->done = (uint64_t)done;
	if (has_mode("futex")) {
		w->kind = SDPSHIM_WAIT_FUTEX;
		w->word = &futex_word;
		w->val = 0;
		w->timeout_ns = 1000000;
	} else {
		w->kind = SDPSHIM_WAIT_FD;
		w->fd = fd;
		w->events = events;
		w->timeout_ns = -1;
	}
	return SDPSHIM_WAIT;
}

/* One data call over the kernel socket, never blocking in here. */
static ssize_t data(int fd, int send, long r, size_t len, int flags, struct sdpshim_wait *w)
{
	n_calls++;
	int err = r < 0 ? errno : 0;
	int may_wait = !has_mode("nowait") && !(flags & MSG_DONTWAIT) && !nonblocking(fd);
	if (r >= 0) {
		if (send)
			n_out += (unsigned long)r;
		else
			n_in += (unsigned long)r;
	}
	if (err == EAGAIN && may_wait)
		return wait_for(w, fd, send ? POLLOUT : POLLIN, 0);
	if (r > 0 && (size_t)r < len && may_wait && (send || (flags & MSG_WAITALL)))
		return wait_for(w, fd, send ? POLLOUT : POLLIN, r);
	return r < 0 ? -err : r;
}

ssize_t sdpshim_core_recv(int fd, void *buf, size_t len, int flags, struct sdpshim_wait *w)
{
	long r = SYS(SYS_recvfrom, fd, buf, len, flags | MSG_DONTWAIT, NULL, NULL);
	return data(fd, 0, r, len, flags, w);
}

ssize_t sdpshim_core_send(int fd, void *buf, size_t len, int flags, struct sdpshim_wait *w)
{
	long r = SYS(SYS_sendto, fd, buf, len, flags | MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0);
	return data(fd, 1, r, len, flags, w);
}

static size_t iov_len(const struct msghdr *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->msg_iovlen; i++)
		n += m->msg_iov[i].iov_len;
	return n;
}

ssize_t sdpshim_core_recvmsg(int fd, struct msghdr *msg, int flags, struct sdpshim_wait *w)
{
	long r = SYS(SYS_recvmsg, fd, msg, flags | MSG_DONTWAIT);
	return data(fd, 0, r, iov_len(msg), flags, w);
}

ssize_t sdpshim_core_sendmsg(int fd, struct msghdr *msg, int flags, struct sdpshim_wait *w)
{
	long r = SYS(SYS_sendmsg, fd, msg, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
	return data(fd, 1, r, iov_len(msg), flags, w);
}

ssize_t sdpshim_core_sendfile(int out_fd, int in_fd, off_t *offset, size_t count, struct sdpshim_wait *w)
{
	(void)w;
	n_calls++;
	logf_("sendfile %d %d %zu", out_fd, in_fd, count);
	long r = SYS(SYS_sendfile, out_fd, in_fd, offset, count);
	if (r > 0)
		n_out += (unsigned long)r;
	return r < 0 ? -errno : r;
}

ssize_t sdpshim_core_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, unsigned int flags,
			    struct sdpshim_wait *w)
{
	(void)w;
	n_calls++;
	logf_("splice %d %d %zu", fd_in, fd_out, len);
	long r = SYS(SYS_splice, fd_in, off_in, fd_out, off_out, len, flags);
	return r < 0 ? -errno : r;
}

int sdpshim_core_shutdown(int fd, int how)
{
	logf_("shutdown %d %d", fd, how);
	return SDPSHIM_PASS;
}

void sdpshim_core_close(int fd) { logf_("close %d", fd); }

int sdpshim_core_dup(int oldfd, int newfd)
{
	logf_("dup %d %d", oldfd, newfd);
	return H->fd_state(oldfd);
}

int sdpshim_core_evict(int fd)
{
	int *slot = fd == pipe_rd ? &pipe_rd : fd == pipe_wr ? &pipe_wr : NULL;
	if (slot == NULL)
		return -EBUSY;
	int nfd = (int)SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 200);
	if (nfd < 0)
		return -errno;
	H->fd_set_state(nfd, SDPSHIM_FD_PROTECTED);
	H->fd_set_state(fd, SDPSHIM_FD_UNMANAGED);
	SYS(SYS_close, fd);
	*slot = nfd;
	logf_("evict %d %d", fd, nfd);
	return 0;
}

void sdpshim_core_nonblock(int fd, int on) { logf_("nonblock %d %d", fd, on); }

int sdpshim_core_ioctl(int fd, unsigned long request, void *arg)
{
	if (request != FIONREAD)
		return SDPSHIM_PASS;
	logf_("fionread %d", fd);
	long r = SYS(SYS_ioctl, fd, request, arg);
	return r < 0 ? -errno : 0;
}

int sdpshim_core_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	(void)fd, (void)level, (void)name, (void)val, (void)len;
	return SDPSHIM_PASS;
}

int sdpshim_core_setsockopt(int fd, int level, int name, void *val, socklen_t len)
{
	(void)fd, (void)level, (void)name, (void)val, (void)len;
	return SDPSHIM_PASS;
}

/* MANAGED entries: their readiness now, and the socket itself to sleep on. */
int sdpshim_core_poll(struct pollfd *fds, nfds_t nfds, struct pollfd *wait, nfds_t wcap, nfds_t *nwait,
		      int64_t timeout_ns)
{
	(void)timeout_ns; /* no polling here */
	int ready = 0;
	n_polls++;
	*nwait = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		if (fds[i].fd < 0 || H->fd_state(fds[i].fd) != SDPSHIM_FD_MANAGED)
			continue;
		struct pollfd p = {.fd = fds[i].fd, .events = fds[i].events};
		struct timespec zero = {0, 0};
		if (SYS(SYS_ppoll, &p, 1, &zero, NULL, 8) > 0 && p.revents) {
			fds[i].revents = p.revents;
			ready++;
		} else if (*nwait < wcap) {
			wait[(*nwait)++] = (struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
		}
	}
	return ready;
}

/* The kernel epoll set holds the sockets themselves: mark the epoll fd
 * MANAGED so that epoll_wait runs the interposer's loop. */
int sdpshim_core_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	long r = SYS(SYS_epoll_ctl, epfd, op, fd, ev);
	if (r < 0)
		return -errno;
	H->fd_set_state(epfd, SDPSHIM_FD_MANAGED);
	return 0;
}

int sdpshim_core_epoll_wait(int epfd, struct epoll_event *ev, int maxevents, int nkernel, int64_t timeout_ns)
{
	(void)epfd, (void)ev, (void)maxevents, (void)timeout_ns;
	n_epolls++;
	return nkernel < 0 ? 0 : nkernel;
}

void sdpshim_core_fork_prepare(int kind) { logf_("fork_prepare %d", kind); }


void sdpshim_core_exit_drain(void) { logf_("exit_drain"); }
void sdpshim_core_pass(int fd) { logf_("pass %d", fd); }
int sdpshim_core_accept_nofd(void) { return 0; }
int sdpshim_core_claim(int fd)
{
	logf_("claim %d", fd);
	return SDPSHIM_FD_CANDIDATE;
}

void sdpshim_core_fork_child(void)
{
	logf_("fork_child");
	H = NULL; /* no stats line from the child */
}
