/*
 * fd.c - close, close_range, closefrom, dup, dup2, dup3, fcntl, fcntl64,
 * ioctl.
 *
 * PROTECTED fds (the core's and the Go runtime's) are invisible to the
 * program, as if that number were not open in its view of the fd table:
 *   close(p)                 -1 EBADF, nothing closed (what close() of a
 *                            number the program never opened returns);
 *   close_range/closefrom    the range is split around them; the rest is
 *                            closed and the call succeeds, as the kernel
 *                            skips numbers that are not open;
 *   dup2/dup3(x, p)          the interposer's own (the core copy for fork
 *                            children, core.c) moves off p; otherwise the
 *                            core is asked to (evict); if it cannot, -1
 *                            EBUSY (the kernel's answer when the target
 *                            slot is busy being installed);
 *   any other call on p      -1 EBADF.
 * The kernel hands out only the lowest free number, so the program never
 * receives p from open(), socket() or dup() while the core holds it.
 */
#include "shim.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* ---- close -------------------------------------------------------------------------------- */

static SDP_COLD int close_slow(int fd)
{
	if (sdp_passthrough()) {
		/* The core's own close (guarded) releases whatever the fd was;
		 * a vfork child's table is its own, ours is the parent's. */
		if (!sdp_vfork_child)
			sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
		return sdp_real.close(fd);
	}
	int s = sdp_fd_state_raw(fd); /* an inherited fd closes without switching anything */
	if (s == SDP_FD_ADOPTING)
		s = sdp_fd_state(fd); /* after the adoption another thread makes */
	if (s == SDPSHIM_FD_PROTECTED)
		return (int)sdp_fail(EBADF);
	if (s == SDP_FD_INHERITED) {
		sdp_fd_drop_inherited(fd);
		return sdp_real.close(fd);
	}
	if (s != SDPSHIM_FD_UNMANAGED && s != SDP_FD_UNSEEN && sdp_core_ready()) {
		int saved = errno;
		SDP_CORE_DO(sdp_core.close(fd));
		errno = saved;
	}
	sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
	return sdp_real.close(fd);
}

SDP_EXPORT int close(int fd)
{
	if (likely(sdp_fd_state_raw(fd) == SDPSHIM_FD_UNMANAGED))
		return sdp_real.close(fd);
	return close_slow(fd);
}

/* Tells the core that fd is going away and forgets its state. */
static void sdp_release(int fd, int state)
{
	if (state == SDP_FD_ADOPTING)
		state = sdp_fd_state(fd); /* after the adoption another thread makes */
	if (state == SDP_FD_INHERITED) {
		sdp_fd_drop_inherited(fd);
		return;
	}
	if (state != SDPSHIM_FD_UNMANAGED && state != SDPSHIM_FD_PROTECTED && state != SDP_FD_UNSEEN && sdp_core_ready())
		SDP_CORE_DO(sdp_core.close(fd));
	sdp_fd_set(fd, SDPSHIM_FD_UNMANAGED);
}

/* close_range(lo, hi, flags) that leaves PROTECTED fds open: closes the
 * gaps between them, notifying the core of CANDIDATE and MANAGED fds first.
 * CLOSE_RANGE_UNSHARE goes with the first real call (the later ones then
 * act on the new private table). */
static int close_range_split(unsigned int lo, unsigned int hi, int flags)
{
	int hi_marked = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	unsigned int scan_end = (unsigned int)hi_marked < hi ? (unsigned int)hi_marked : hi;
	unsigned int start = lo;
	int first = 1, rc = 0, saved = errno;
	for (unsigned int fd = lo; hi_marked >= 0 && fd <= scan_end; fd++) {
		int s = sdp_fd_state_raw((int)fd);
		if (s == SDPSHIM_FD_UNMANAGED)
			continue;
		if (s != SDPSHIM_FD_PROTECTED) {
			sdp_release((int)fd, s);
			continue;
		}
		if (fd > start) {
			int r = sdp_real.close_range(start, fd - 1, first ? flags : (int)(flags & ~(int)CLOSE_RANGE_UNSHARE));
			if (r < 0 && rc == 0)
				rc = -errno;
			first = 0;
		}
		start = fd + 1; /* fd <= INT_MAX: no wrap */
	}
	if (start <= hi) {
		int r = sdp_real.close_range(start, hi, first ? flags : (int)(flags & ~(int)CLOSE_RANGE_UNSHARE));
		if (r < 0 && rc == 0)
			rc = -errno;
		first = 0;
	}
	if (first && (flags & CLOSE_RANGE_UNSHARE)) /* all protected: still unshare */
		sdp_real.close_range(~0U, ~0U, CLOSE_RANGE_UNSHARE);
	if (rc < 0)
		return (int)sdp_fail(-rc);
	errno = saved;
	return 0;
}

SDP_EXPORT int close_range(unsigned int lo, unsigned int hi, int flags)
{
	int hi_marked = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	/* Nothing of ours in range, or only marking close-on-exec (which
	 * closes nothing now; protected fds are close-on-exec already). */
	if (likely(hi_marked < 0 || (unsigned int)hi_marked < lo) || lo > hi || (flags & CLOSE_RANGE_CLOEXEC) ||
	    (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || sdp_passthrough())
		return sdp_real.close_range(lo, hi, flags);
	return close_range_split(lo, hi, flags);
}

SDP_EXPORT void closefrom(int lowfd)
{
	int hi_marked = __atomic_load_n(&sdp_fd_hi, __ATOMIC_RELAXED);
	if (lowfd < 0 || hi_marked < lowfd || sdp_passthrough()) {
		sdp_real.closefrom(lowfd);
		return;
	}
	if (close_range_split((unsigned int)lowfd, ~0U, 0) < 0 && errno == ENOSYS) {
		/* Kernel older than 5.9: one by one, up to the highest open. */
		for (int fd = lowfd; fd <= hi_marked + 1024; fd++)
			if (sdp_fd_state_raw(fd) != SDPSHIM_FD_PROTECTED)
				close(fd);
	}
}

/* ---- dup -------------------------------------------------------------------------------- */

/* newfd now refers to what oldfd (in state s) refers to. */
static void sdp_dup_done(int oldfd, int s, int newfd)
{
	int st = SDPSHIM_FD_UNMANAGED;
	if (s != SDPSHIM_FD_UNMANAGED && sdp_core_ready()) {
		int saved = errno;
		st = SDP_CORE_CALL(sdp_core.dup(oldfd, newfd));
		errno = saved;
		if (st < SDPSHIM_FD_UNMANAGED || st > SDPSHIM_FD_MANAGED)
			st = SDPSHIM_FD_UNMANAGED;
		if (st == SDPSHIM_FD_CANDIDATE && sdp_fd_state_raw(oldfd) == SDP_FD_DEFERRED)
			st = SDP_FD_DEFERRED; /* a copy is claimed at its first use too */
	}
	sdp_fd_fresh(newfd, st);
}

static SDP_COLD int dup_slow(int fd)
{
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL: {
		int nfd = sdp_real.dup(fd);
		if (nfd >= 0 && !sdp_passthrough())
			sdp_fd_fresh(nfd, SDPSHIM_FD_UNMANAGED);
		return nfd;
	}
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int nfd = sdp_real.dup(fd);
	if (nfd >= 0)
		sdp_dup_done(fd, sdp_fd_state(fd), nfd);
	return nfd;
}

SDP_EXPORT int dup(int fd)
{
	if (likely(sdp_fd_plain(fd))) {
		int nfd = sdp_real.dup(fd);
		if (nfd >= 0)
			sdp_fd_fresh(nfd, SDPSHIM_FD_UNMANAGED);
		return nfd;
	}
	return dup_slow(fd);
}

/* dup2 (is3 == 0) and dup3 onto a newfd that is, or an oldfd that is, not
 * UNMANAGED. */
static SDP_COLD int dup23_slow(int oldfd, int newfd, int flags, int is3)
{
	if (sdp_passthrough() || oldfd == newfd)
		return is3 ? sdp_real.dup3(oldfd, newfd, flags) : sdp_real.dup2(oldfd, newfd);
	int so = sdp_fd_state(oldfd);
	int sn = sdp_fd_state_raw(newfd) == SDP_FD_UNSEEN ? SDP_FD_UNSEEN : sdp_fd_state(newfd); /* closed: not adopted */
	if (so == SDPSHIM_FD_PROTECTED)
		return (int)sdp_fail(EBADF);
	if (sn == SDPSHIM_FD_PROTECTED) {
		int r = sdp_core_evict_own(newfd) == 0 ? 0
			: sdp_core_ready()           ? SDP_CORE_CALL(sdp_core.evict(newfd))
						     : -EBUSY;
		if (r != 0 || sdp_fd_state(newfd) == SDPSHIM_FD_PROTECTED)
			return (int)sdp_fail(EBUSY);
		sn = SDPSHIM_FD_UNMANAGED;
	}
	if (sn != SDPSHIM_FD_UNMANAGED) {
		/* The kernel closes newfd only if oldfd is valid: check first,
		 * then let the core release newfd while it is still open. */
		if (sdp_real.fcntl(oldfd, F_GETFD) < 0)
			return -1;
		if ((flags & ~O_CLOEXEC) && is3)
			return (int)sdp_fail(EINVAL);
		sdp_release(newfd, sn);
	}
	int r = is3 ? sdp_real.dup3(oldfd, newfd, flags) : sdp_real.dup2(oldfd, newfd);
	if (r >= 0)
		sdp_dup_done(oldfd, so, newfd);
	return r;
}

SDP_EXPORT int dup2(int oldfd, int newfd)
{
	if (likely(sdp_fd_plain(oldfd) && sdp_fd_plain(newfd)))
		return sdp_real.dup2(oldfd, newfd);
	return dup23_slow(oldfd, newfd, 0, 0);
}

SDP_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (likely(sdp_fd_plain(oldfd) && sdp_fd_plain(newfd)))
		return sdp_real.dup3(oldfd, newfd, flags);
	return dup23_slow(oldfd, newfd, flags, 1);
}

/* ---- fcntl, ioctl --------------------------------------------------------------------------- */

typedef int fcntl_fn(int, int, ...);

/* fcntl takes at most one argument, an int or a pointer: read it as a
 * pointer-sized word and pass it on, as glibc itself does for every cmd. */
static SDP_COLD int fcntl_slow(fcntl_fn *real, int fd, int cmd, void *arg)
{
	if ((cmd == F_GETFL || cmd == F_SETFL || cmd == F_GETFD) && sdp_fd_continues(fd)) {
		/* A fork child going on over its parent's area: the flags are
		 * the kernel's, O_NONBLOCK copied to the handle. */
		int r = real(fd, cmd, arg);
		if (r >= 0 && cmd == F_SETFL)
			sdp_direct_nonblock(fd, ((int)(intptr_t)arg & O_NONBLOCK) != 0);
		return r;
	}
	if (sdp_fd_state_raw(fd) == SDP_FD_UNSEEN && cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
		return real(fd, cmd, arg); /* O_NONBLOCK: the core reads it when it adopts fd */
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL: {
		int r = real(fd, cmd, arg);
		if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && !sdp_passthrough())
			sdp_fd_fresh(r, SDPSHIM_FD_UNMANAGED);
		return r;
	}
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	int r = real(fd, cmd, arg);
	if (r < 0)
		return r;
	int saved = errno;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		sdp_dup_done(fd, sdp_fd_state(fd), r);
		break;
	case F_SETFL:
		SDP_CORE_DO(sdp_core.nonblock(fd, ((int)(intptr_t)arg & O_NONBLOCK) != 0));
		break;
	}
	errno = saved;
	return r;
}

static inline int fcntl_any(fcntl_fn *real, int fd, int cmd, void *arg)
{
	if (likely(sdp_fd_plain(fd))) {
		if (likely(cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC))
			return real(fd, cmd, arg);
		int r = real(fd, cmd, arg);
		if (r >= 0)
			sdp_fd_fresh(r, SDPSHIM_FD_UNMANAGED);
		return r;
	}
	return fcntl_slow(real, fd, cmd, arg);
}

SDP_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(sdp_real.fcntl, fd, cmd, arg);
}

SDP_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(sdp_real.fcntl64, fd, cmd, arg);
}

static SDP_COLD int ioctl_slow(int fd, unsigned long req, void *arg)
{
	if (req == FIONBIO && sdp_fd_state_raw(fd) == SDP_FD_UNSEEN)
		return sdp_real.ioctl(fd, req, arg); /* as fcntl_slow's F_SETFL */
	if (req == FIONBIO && sdp_fd_continues(fd)) {
		int r = sdp_real.ioctl(fd, req, arg); /* as fcntl_slow's F_SETFL */
		if (r == 0)
			sdp_direct_nonblock(fd, *(int *)arg != 0);
		return r;
	}
	switch (sdp_route(fd)) {
	case SDP_ROUTE_REAL:
		return sdp_real.ioctl(fd, req, arg);
	case SDP_ROUTE_BADF:
		return (int)sdp_fail(EBADF);
	}
	if (req == FIONBIO) {
		int r = sdp_real.ioctl(fd, req, arg);
		if (r == 0) {
			int saved = errno;
			SDP_CORE_DO(sdp_core.nonblock(fd, *(int *)arg != 0));
			errno = saved;
		}
		return r;
	}
	int r = SDP_CORE_CALL(sdp_core.ioctl(fd, req, arg));
	return r == SDPSHIM_PASS ? sdp_real.ioctl(fd, req, arg) : (int)sdp_result(r, 0);
}

SDP_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.ioctl(fd, req, arg);
	return ioctl_slow(fd, req, arg);
}
