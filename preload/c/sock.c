/*
 * sock.c - socket, bind, listen, accept, accept4, connect, shutdown,
 * getsockopt, setsockopt, getsockname, getpeername.
 *
 * socket() is where the core gets loaded: on the first AF_INET/AF_INET6
 * SOCK_STREAM socket (protocol 0 or IPPROTO_TCP) of the process. Such a
 * socket starts unseen by the core (SDP_FD_UNSEEN, shim.h), which adopts
 * it at its first call that needs it. Every other socket is created by
 * libc and left alone.
 */
#include "shim.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>

static int sdp_is_tcp(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

static int sdp_valid_state(int s) { return s >= SDPSHIM_FD_UNMANAGED && s <= SDPSHIM_FD_MANAGED; }

static SDP_COLD int socket_tcp(int fd)
{
	if (sdp_passthrough()) {
		if (sdp_vfork_child)
			sdp_fallback_note(SDPSHIM_REASON_VFORK_CHILD, fd);
		else
			sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED); /* the core's own socket */
		return fd;
	}
	if (!sdp_core_acquire()) {
		int reason = sdp_core_off_reason();
		sdp_fallback_note(reason ? reason : SDPSHIM_REASON_CORE_BUSY, fd);
		sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
		return fd;
	}
	sdp_fd_fresh(fd, SDP_FD_UNSEEN); /* the core hears of it at its first call that needs it */
	return fd;
}

/* 1 + the fd this thread is adopting, 0: none (a signal handler that
 * interrupts the adoption must not wait for it). */
static SDP_TLS int sdp_adopting;

/* Waits (yielding, at most 2 s) while another thread adopts fd; returns
 * its state then. */
static SDP_COLD int sdp_fd_adopted(int fd)
{
	int64_t deadline = sdp_now_ns() + 2000000000LL;
	int s;
	while ((s = sdp_fd_state_raw(fd)) == SDP_FD_ADOPTING && sdp_now_ns() < deadline)
		sched_yield();
	return s == SDP_FD_ADOPTING ? SDPSHIM_FD_CANDIDATE : sdp_fd_state(fd);
}

int sdp_fd_adopt(int fd)
{
	if (sdp_passthrough() || sdp_adopting == fd + 1)
		return SDPSHIM_FD_CANDIDATE;
	if (!sdp_fd_cas(fd, SDP_FD_UNSEEN, SDP_FD_ADOPTING))
		return sdp_fd_adopted(fd); /* another thread adopts it, or did, or it changed */
	int outer = sdp_adopting; /* a signal handler's adoption inside another's */
	sdp_adopting = fd + 1;
	int saved = errno, st = SDPSHIM_FD_UNMANAGED, domain = 0, type = 0;
	socklen_t l = sizeof domain;
	if (sdp_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0 || (domain != AF_INET && domain != AF_INET6) ||
	    (l = sizeof type, sdp_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l)) != 0 || type != SOCK_STREAM) {
		/* closed out of our sight: the number is something else now */
	} else if (!sdp_core_want()) {
		int reason = sdp_core_off_reason();
		sdp_fallback_note(reason ? reason : SDPSHIM_REASON_CORE_BUSY, fd);
	} else {
		int fl = sdp_real.fcntl(fd, F_GETFL);
		int r = SDP_CORE_CALL(sdp_core.socket(fd, domain, SOCK_STREAM | (fl >= 0 && (fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0),
						     IPPROTO_TCP));
		if (sdp_valid_state(r))
			st = r;
	}
	/* Only this thread changes an adopting fd, bar a signal handler on it
	 * (which takes it as CANDIDATE meanwhile and may close it). */
	sdp_fd_cas(fd, SDP_FD_ADOPTING, st);
	sdp_adopting = outer;
	errno = saved;
	return st;
}

SDP_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = sdp_real.socket(domain, type, protocol);
	if (fd < 0)
		return fd;
	if (unlikely(sdp_is_tcp(domain, type, protocol)))
		return socket_tcp(fd);
	sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
	return fd;
}

static SDP_COLD int bind_slow(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (sdp_fd_state_raw(fd) == SDP_FD_UNSEEN) /* the core's bind hook passes */
		return sdp_real.bind(fd, addr, len);
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.bind(fd, addr, len);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = SDP_CORE_CALL(sdp_core.bind(fd, (struct sockaddr *)addr, len));
	return r == SDPSHIM_PASS ? sdp_real.bind(fd, addr, len) : (int)sdp_result(r, 0);
}

SDP_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.bind(fd, addr, len);
	return bind_slow(fd, addr, len);
}

static SDP_COLD int listen_slow(int fd, int backlog)
{
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.listen(fd, backlog);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = SDP_CORE_CALL(sdp_core.listen(fd, backlog));
	return r == SDPSHIM_PASS ? sdp_real.listen(fd, backlog) : (int)sdp_result(r, 0);
}

SDP_EXPORT int listen(int fd, int backlog)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.listen(fd, backlog);
	return listen_slow(fd, backlog);
}

/* accept on a CANDIDATE or MANAGED listener: the kernel accepts (blocking
 * there, with the kernel's signal and cancellation semantics), then the core
 * decides what the new fd is, knowing the peer address without a syscall. */
static SDP_COLD int accept_slow(int lfd, struct sockaddr *addr, socklen_t *len, int flags, int is4)
{
	switch (sdp_route(lfd)) {
	case SDP_ROUTE_REAL: {
		int fd = is4 ? sdp_real.accept4(lfd, addr, len, flags) : sdp_real.accept(lfd, addr, len);
		if (fd >= 0) {
			sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
			/* a fork child accepting on an inherited listener (proc.c) */
			if (!sdp_passthrough() && sdp_core_off_reason() == SDPSHIM_REASON_FORK_DECLINE) {
				sdp_fallback_note(SDPSHIM_REASON_FORK_DECLINE, fd);
				sdp_log(SDP_LOG_DEBUG, "fork child: fd %d accepted on an inherited listener stays on "
					"kernel TCP (fork-exec-decline)", fd);
			}
		}
		return fd;
	}
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int fd = is4 ? sdp_real.accept4(lfd, (struct sockaddr *)&ss, &sl, flags)
		     : sdp_real.accept(lfd, (struct sockaddr *)&ss, &sl);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && sdp_core_ready()) {
		/* Offers waiting for their accept hold fds the kernel's backlog
		 * would not: the program's accept comes first. */
		int saved = errno;
		if (SDP_CORE_CALL(sdp_core.accept_nofd()) > 0) {
			sl = sizeof ss;
			fd = is4 ? sdp_real.accept4(lfd, (struct sockaddr *)&ss, &sl, flags)
				 : sdp_real.accept(lfd, (struct sockaddr *)&ss, &sl);
		} else {
			errno = saved;
		}
	}
	if (fd < 0)
		return fd;
	if (addr != NULL && len != NULL) { /* truncate, report the full length */
		memcpy(addr, &ss, *len < sl ? *len : sl);
		*len = sl;
	}
	if (sdp_plain_accept(lfd, fd)) {
		sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
		return fd;
	}
	int saved = errno;
	int st = SDP_CORE_CALL(sdp_core.accept(lfd, fd, (struct sockaddr *)&ss, sl, is4 ? flags : 0));
	sdp_fd_fresh(fd, sdp_valid_state(st) ? st : SDPSHIM_FD_UNMANAGED);
	if (st == SDPSHIM_FD_CANDIDATE) { /* deferred: claimed at its first use */
		sdp_fd_set(fd, SDP_FD_DEFERRED);
		__atomic_store_n(&sdp_deferred_hint, 1, __ATOMIC_RELAXED);
	}
	errno = saved;
	return fd;
}

SDP_EXPORT int accept(int lfd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
	if (likely(sdp_fd_plain(lfd))) {
		int fd = sdp_real.accept(lfd, addr, len);
		if (fd >= 0)
			sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
		return fd;
	}
	return accept_slow(lfd, addr, len, 0, 0);
}

SDP_EXPORT int accept4(int lfd, struct sockaddr *restrict addr, socklen_t *restrict len, int flags)
{
	if (likely(sdp_fd_plain(lfd))) {
		int fd = sdp_real.accept4(lfd, addr, len, flags);
		if (fd >= 0)
			sdp_fd_fresh(fd, SDPSHIM_FD_UNMANAGED);
		return fd;
	}
	return accept_slow(lfd, addr, len, flags, 1);
}

static long core_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sdpshim_wait w;
	for (;;) {
		memset(&w, 0, sizeof w);
		long r = SDP_CORE_CALL(sdp_core.connect(fd, (struct sockaddr *)addr, len, &w));
		if (r != SDPSHIM_WAIT)
			return r;
		int e = sdp_wait(&w);
		if (e != 0)
			return -e;
	}
}

static SDP_COLD int connect_slow(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (sdp_fd_state_raw(fd) == SDP_FD_UNSEEN && !sdp_passthrough() && sdp_short_connect(fd, addr, len))
		return sdp_real.connect(fd, addr, len);
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.connect(fd, addr, len);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	long r = core_connect(fd, addr, len);
	return r == SDPSHIM_PASS ? sdp_real.connect(fd, addr, len) : (int)sdp_result(r, 0);
}

SDP_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.connect(fd, addr, len);
	return connect_slow(fd, addr, len);
}

static SDP_COLD int shutdown_slow(int fd, int how)
{
	if (how == SHUT_WR && sdp_fd_continues(fd) && sdp_direct_shut_wr(fd) == 0)
		return 0; /* a fork child going on over its parent's area (forkkeep.c) */
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.shutdown(fd, how);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = SDP_CORE_CALL(sdp_core.shutdown(fd, how));
	return r == SDPSHIM_PASS ? sdp_real.shutdown(fd, how) : (int)sdp_result(r, 0);
}

SDP_EXPORT int shutdown(int fd, int how)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.shutdown(fd, how);
	return shutdown_slow(fd, how);
}

/* A fork child going on over fd's inherited area, with an option the
 * kernel answers (sdp_direct_inherited_sockopt). */
static int sockopt_inherited(int fd, int set, int level, int name, const void *val, socklen_t len)
{
	return sdp_fd_continues(fd) && sdp_direct_inherited_sockopt(fd, set, level, name, val, len);
}

/* 1 for a socket option the core keeps per socket (shim/options.go's
 * Setsockopt): one set on an unseen socket adopts it. The kernel alone
 * takes the others, and answers every getsockopt of an unseen socket. */
static int sockopt_kept(int level, int name)
{
	if (level != SOL_SOCKET)
		return 0;
	switch (name) {
	case SO_LINGER:
	case SO_RCVTIMEO_OLD:
	case SO_RCVTIMEO_NEW:
	case SO_SNDTIMEO_OLD:
	case SO_SNDTIMEO_NEW:
	case SO_RCVBUF:
	case SO_RCVBUFFORCE:
	case SO_SNDBUF:
	case SO_SNDBUFFORCE:
		return 1;
	}
	return 0;
}

static SDP_COLD int getsockopt_slow(int fd, int level, int name, void *val, socklen_t *len)
{
	if (sdp_fd_state_raw(fd) == SDP_FD_UNSEEN || sockopt_inherited(fd, 0, level, name, NULL, 0))
		return sdp_real.getsockopt(fd, level, name, val, len);
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.getsockopt(fd, level, name, val, len);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = SDP_CORE_CALL(sdp_core.getsockopt(fd, level, name, val, len));
	return r == SDPSHIM_PASS ? sdp_real.getsockopt(fd, level, name, val, len) : (int)sdp_result(r, 0);
}

SDP_EXPORT int getsockopt(int fd, int level, int name, void *restrict val, socklen_t *restrict len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.getsockopt(fd, level, name, val, len);
	return getsockopt_slow(fd, level, name, val, len);
}

static SDP_COLD int setsockopt_slow(int fd, int level, int name, const void *val, socklen_t len)
{
	if ((sdp_fd_state_raw(fd) == SDP_FD_UNSEEN && !sockopt_kept(level, name)) ||
	    sockopt_inherited(fd, 1, level, name, val, len))
		return sdp_real.setsockopt(fd, level, name, val, len);
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.setsockopt(fd, level, name, val, len);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = SDP_CORE_CALL(sdp_core.setsockopt(fd, level, name, (void *)val, len));
	return r == SDPSHIM_PASS ? sdp_real.setsockopt(fd, level, name, val, len) : (int)sdp_result(r, 0);
}

SDP_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.setsockopt(fd, level, name, val, len);
	return setsockopt_slow(fd, level, name, val, len);
}

/* The kernel socket stays open and connected beside an accelerated stream,
 * so the kernel's names are exact: no hook. Only a PROTECTED fd is refused
 * (an unseen socket is asked nothing: no adoption for its names). */
static inline int sdp_names_badf(int fd)
{
	int s = sdp_fd_state_raw(fd);
	return s != SDPSHIM_FD_UNMANAGED && s != SDP_FD_UNSEEN && sdp_route_io(fd) == SDP_ROUTE_BADF;
}

SDP_EXPORT int getsockname(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
	if (unlikely(sdp_names_badf(fd)))
		return (int)sdp_fail(EBADF);
	return sdp_real.getsockname(fd, addr, len);
}

SDP_EXPORT int getpeername(int fd, struct sockaddr *restrict addr, socklen_t *restrict len)
{
	if (unlikely(sdp_names_badf(fd)))
		return (int)sdp_fail(EBADF);
	return sdp_real.getpeername(fd, addr, len);
}
