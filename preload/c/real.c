/*
 * real.c - the real libc entry points.
 *
 * sdp_init() resolves every interposed name once with dlsym(RTLD_NEXT) into
 * sdp_real, from the constructor, before anything else in the library runs.
 * A call can arrive earlier (another library's constructor calling socket()
 * before ours has run): every pointer of sdp_real starts as a boot stub that
 * runs sdp_init() first. While sdp_init() runs, a call from inside it (dlsym
 * may allocate, an allocator may read a file) or from another thread does
 * not wait: it makes the raw system call (sdp_sys), so nothing deadlocks or
 * recurses. Names an older libc lacks (close_range, closefrom before 2.34,
 * epoll_pwait2 before 2.35, fcntl64 before 2.28) keep their raw versions.
 */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif

extern void __chk_fail(void) __attribute__((noreturn));

SDP_TLS int sdp_guard;
SDP_TLS int sdp_vfork_child;

/* ---- raw system calls ----------------------------------------------------- */

#define SYS_(...) ((int)syscall(__VA_ARGS__))
#define SYSL_(...) ((ssize_t)syscall(__VA_ARGS__))

static int sys_socket(int d, int t, int p) { return SYS_(SYS_socket, d, t, p); }
static int sys_bind(int fd, const struct sockaddr *a, socklen_t l) { return SYS_(SYS_bind, fd, a, l); }
static int sys_listen(int fd, int b) { return SYS_(SYS_listen, fd, b); }
static int sys_accept(int fd, struct sockaddr *a, socklen_t *l) { return SYS_(SYS_accept4, fd, a, l, 0); }
static int sys_accept4(int fd, struct sockaddr *a, socklen_t *l, int f) { return SYS_(SYS_accept4, fd, a, l, f); }
static int sys_connect(int fd, const struct sockaddr *a, socklen_t l) { return SYS_(SYS_connect, fd, a, l); }
static ssize_t sys_read(int fd, void *b, size_t n) { return SYSL_(SYS_read, fd, b, n); }
static ssize_t sys_readv(int fd, const struct iovec *v, int n) { return SYSL_(SYS_readv, fd, v, n); }
static ssize_t sys_write(int fd, const void *b, size_t n) { return SYSL_(SYS_write, fd, b, n); }
static ssize_t sys_writev(int fd, const struct iovec *v, int n) { return SYSL_(SYS_writev, fd, v, n); }
static ssize_t sys_send(int fd, const void *b, size_t n, int f) { return SYSL_(SYS_sendto, fd, b, n, f, NULL, 0); }
static ssize_t sys_sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{
	return SYSL_(SYS_sendto, fd, b, n, f, a, l);
}
static ssize_t sys_sendmsg(int fd, const struct msghdr *m, int f) { return SYSL_(SYS_sendmsg, fd, m, f); }
static int sys_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int f) { return SYS_(SYS_sendmmsg, fd, v, n, f); }
static ssize_t sys_recv(int fd, void *b, size_t n, int f) { return SYSL_(SYS_recvfrom, fd, b, n, f, NULL, NULL); }
static ssize_t sys_recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
	return SYSL_(SYS_recvfrom, fd, b, n, f, a, l);
}
static ssize_t sys_recvmsg(int fd, struct msghdr *m, int f) { return SYSL_(SYS_recvmsg, fd, m, f); }
static int sys_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int f, struct timespec *t)
{
	return SYS_(SYS_recvmmsg, fd, v, n, f, t);
}
static ssize_t sys___read_chk(int fd, void *b, size_t n, size_t bl)
{
	if (n > bl)
		__chk_fail();
	return sys_read(fd, b, n);
}
static ssize_t sys___recv_chk(int fd, void *b, size_t n, size_t bl, int f)
{
	if (n > bl)
		__chk_fail();
	return sys_recv(fd, b, n, f);
}
static ssize_t sys___recvfrom_chk(int fd, void *b, size_t n, size_t bl, int f, struct sockaddr *a, socklen_t *l)
{
	if (n > bl)
		__chk_fail();
	return sys_recvfrom(fd, b, n, f, a, l);
}
static int sys_close(int fd) { return SYS_(SYS_close, fd); }
static int sys_close_range(unsigned int lo, unsigned int hi, int f) { return SYS_(SYS_close_range, lo, hi, f); }
static void sys_closefrom(int lowfd)
{
	if (lowfd >= 0)
		syscall(SYS_close_range, lowfd, ~0U, 0);
}
static int sys_shutdown(int fd, int how) { return SYS_(SYS_shutdown, fd, how); }
static int sys_dup(int fd) { return SYS_(SYS_dup, fd); }
static int sys_dup3(int o, int n, int f) { return SYS_(SYS_dup3, o, n, f); }
static int sys_dup2(int o, int n)
{
	if (o == n)
		return SYS_(SYS_fcntl, o, F_GETFD) < 0 ? -1 : n;
	return sys_dup3(o, n, 0);
}
static int sys_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return SYS_(SYS_fcntl, fd, cmd, arg);
}
static int sys_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return SYS_(SYS_ioctl, fd, req, arg);
}
static int sys_getsockopt(int fd, int lv, int nm, void *v, socklen_t *l) { return SYS_(SYS_getsockopt, fd, lv, nm, v, l); }
static int sys_setsockopt(int fd, int lv, int nm, const void *v, socklen_t l)
{
	return SYS_(SYS_setsockopt, fd, lv, nm, v, l);
}
static int sys_getsockname(int fd, struct sockaddr *a, socklen_t *l) { return SYS_(SYS_getsockname, fd, a, l); }
static int sys_getpeername(int fd, struct sockaddr *a, socklen_t *l) { return SYS_(SYS_getpeername, fd, a, l); }
static ssize_t sys_sendfile(int o, int i, off_t *off, size_t n) { return SYSL_(SYS_sendfile, o, i, off, n); }
static ssize_t sys_sendfile64(int o, int i, off64_t *off, size_t n) { return SYSL_(SYS_sendfile, o, i, off, n); }
static ssize_t sys_splice(int i, loff_t *oi, int o, loff_t *oo, size_t n, unsigned int f)
{
	return SYSL_(SYS_splice, i, oi, o, oo, n, f);
}

/* fork and posix_spawn have no raw equivalent (atfork handlers, the spawn
 * helper): look the one symbol up on its own. Reached only in the window
 * where another thread is still in sdp_init(). */
static pid_t sys_fork(void)
{
	pid_t (*f)(void) = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	if (f == NULL) {
		errno = EAGAIN;
		return -1;
	}
	return f();
}
typedef int spawn_fn(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
		     char *const[], char *const[]);
static int sys_posix_spawn(pid_t *p, const char *f, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
			   char *const av[], char *const ev[])
{
	spawn_fn *s = (spawn_fn *)dlsym(RTLD_NEXT, "posix_spawn");
	return s ? s(p, f, fa, at, av, ev) : EAGAIN;
}
static int sys_posix_spawnp(pid_t *p, const char *f, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
			    char *const av[], char *const ev[])
{
	spawn_fn *s = (spawn_fn *)dlsym(RTLD_NEXT, "posix_spawnp");
	return s ? s(p, f, fa, at, av, ev) : EAGAIN;
}

static int sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	struct timespec copy, *tp = NULL; /* the kernel writes the time left */
	if (t != NULL) {
		copy = *t;
		tp = &copy;
	}
	return SYS_(SYS_ppoll, fds, n, tp, m, _NSIG / 8);
}
static int sys_poll(struct pollfd *fds, nfds_t n, int t)
{
	struct timespec ts = {t / 1000, (long)(t % 1000) * 1000000};
	return sys_ppoll(fds, n, t < 0 ? NULL : &ts, NULL);
}
static int sys___poll_chk(struct pollfd *fds, nfds_t n, int t, size_t l)
{
	if (l / sizeof(*fds) < n)
		__chk_fail();
	return sys_poll(fds, n, t);
}
static int sys___ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m, size_t l)
{
	if (l / sizeof(*fds) < n)
		__chk_fail();
	return sys_ppoll(fds, n, t, m);
}
static int sys_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m)
{
	struct timespec copy, *tp = NULL;
	struct {
		const sigset_t *ss;
		size_t len;
	} data = {m, _NSIG / 8};
	if (t != NULL) {
		copy = *t;
		tp = &copy;
	}
	return SYS_(SYS_pselect6, n, r, w, e, tp, &data);
}
static int sys_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	struct timespec ts, *tp = NULL;
	if (t != NULL) {
		ts.tv_sec = t->tv_sec;
		ts.tv_nsec = t->tv_usec * 1000;
		tp = &ts;
	}
	int rc = SYS_(SYS_pselect6, n, r, w, e, tp, NULL);
	if (t != NULL) { /* select reports the time left, as Linux does */
		t->tv_sec = ts.tv_sec;
		t->tv_usec = ts.tv_nsec / 1000;
	}
	return rc;
}
static int sys_epoll_create(int n)
{
	if (n <= 0) {
		errno = EINVAL;
		return -1;
	}
	return SYS_(SYS_epoll_create1, 0);
}
static int sys_epoll_create1(int f) { return SYS_(SYS_epoll_create1, f); }
static int sys_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev) { return SYS_(SYS_epoll_ctl, ep, op, fd, ev); }
static int sys_epoll_wait(int ep, struct epoll_event *ev, int n, int t)
{
	return SYS_(SYS_epoll_pwait, ep, ev, n, t, NULL, 0);
}
static int sys_epoll_pwait(int ep, struct epoll_event *ev, int n, int t, const sigset_t *m)
{
	return SYS_(SYS_epoll_pwait, ep, ev, n, t, m, _NSIG / 8);
}
static int sys_epoll_pwait2(int ep, struct epoll_event *ev, int n, const struct timespec *t, const sigset_t *m)
{
	return SYS_(SYS_epoll_pwait2, ep, ev, n, t, m, _NSIG / 8);
}

#define SDP_SYS_ENTRY_(name, ret, params, args) .name = sys_##name,
const struct sdp_real sdp_sys = {
	SDP_REAL_FIXED(SDP_SYS_ENTRY_)
	.closefrom = sys_closefrom,
	.fcntl = sys_fcntl,
	.fcntl64 = sys_fcntl,
	.ioctl = sys_ioctl,
};
#undef SDP_SYS_ENTRY_

/* ---- boot stubs ------------------------------------------------------------- */

static int sdp_init_state;         /* 0 not run, 1 running, 2 done */
static SDP_TLS int sdp_initializing; /* this thread is inside sdp_init() */

/* 1 when sdp_real is resolved (resolving it now if nobody has started). */
static int sdp_boot(void)
{
	if (__atomic_load_n(&sdp_init_state, __ATOMIC_ACQUIRE) != 2 && !sdp_initializing)
		sdp_init();
	return __atomic_load_n(&sdp_init_state, __ATOMIC_ACQUIRE) == 2;
}

#define SDP_BOOT_(name, ret, params, args)                                                        \
	static ret boot_##name params                                                              \
	{                                                                                          \
		if (sdp_boot())                                                                    \
			return sdp_real.name args;                                                 \
		return sdp_sys.name args;                                                          \
	}
SDP_REAL_FIXED(SDP_BOOT_)
#undef SDP_BOOT_

static void boot_closefrom(int lowfd)
{
	if (sdp_boot())
		sdp_real.closefrom(lowfd);
	else
		sys_closefrom(lowfd);
}

#define SDP_BOOT_VARIADIC_(name, type2)                                                           \
	static int boot_##name(int fd, type2 cmd, ...)                                             \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, cmd);                                                                 \
		void *arg = va_arg(ap, void *);                                                    \
		va_end(ap);                                                                        \
		if (sdp_boot())                                                                    \
			return sdp_real.name(fd, cmd, arg);                                        \
		return sdp_sys.name(fd, cmd, arg);                                                 \
	}
SDP_BOOT_VARIADIC_(fcntl, int)
SDP_BOOT_VARIADIC_(fcntl64, int)
SDP_BOOT_VARIADIC_(ioctl, unsigned long)
#undef SDP_BOOT_VARIADIC_

#define SDP_BOOT_ENTRY_(name, ret, params, args) .name = boot_##name,
struct sdp_real sdp_real = {
	SDP_REAL_FIXED(SDP_BOOT_ENTRY_)
	SDP_REAL_OTHER(SDP_BOOT_ENTRY_)
};
#undef SDP_BOOT_ENTRY_

void sdp_init(void)
{
	int idle = 0;
	if (__atomic_load_n(&sdp_init_state, __ATOMIC_ACQUIRE) == 2)
		return;
	/* One thread resolves; any other caller meanwhile uses sdp_sys. */
	if (!__atomic_compare_exchange_n(&sdp_init_state, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	sdp_initializing = 1;
	int saved = errno;
#define SDP_RESOLVE_(name, ret, params, args)                                                     \
	{                                                                                          \
		void *p = dlsym(RTLD_NEXT, #name);                                                 \
		__atomic_store_n(&sdp_real.name, p ? (__typeof__(sdp_real.name))p : sdp_sys.name, \
				 __ATOMIC_RELAXED);                                                \
	}
	SDP_REAL_FIXED(SDP_RESOLVE_)
	SDP_REAL_OTHER(SDP_RESOLVE_)
#undef SDP_RESOLVE_
	errno = saved;
	__atomic_store_n(&sdp_init_state, 2, __ATOMIC_RELEASE);
	sdp_initializing = 0;
}

__attribute__((constructor)) static void sdp_constructor(void)
{
	sdp_init();
	sdp_core_note_self();
	sdp_exec_init();
}
