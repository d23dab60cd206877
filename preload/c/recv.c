/*
 * recv.c - the receive side: read, readv, recv, recvfrom, recvmsg, recvmmsg,
 * __read_chk, __recv_chk, __recvfrom_chk.
 *
 * Each exported function is a table lookup and a tail call to libc for an
 * UNMANAGED fd; the rest lives in cold functions. For a CANDIDATE or MANAGED
 * fd with the core running it is one hook call (plus a kernel sleep and a
 * new call each time the hook answers SDPSHIM_WAIT, wait.c). PROTECTED fds
 * are not the program's: EBADF.
 */
#include "shim.h"

#include <sys/uio.h>

/* ---- receive ---------------------------------------------------------------------------- */

static SDP_COLD ssize_t read_slow(int fd, void *buf, size_t n)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.read(fd, buf, n));
	long r = sdp_core_recv(fd, buf, n, 0);
	return r == SDPSHIM_PASS ? sdp_real.read(fd, buf, n) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.read(fd, buf, n);
	return read_slow(fd, buf, n);
}

static SDP_COLD ssize_t read_chk_slow(int fd, void *buf, size_t n, size_t buflen)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.__read_chk(fd, buf, n, buflen));
	if (n > buflen)
		return sdp_real.__read_chk(fd, buf, n, buflen); /* fails the check */
	long r = sdp_core_recv(fd, buf, n, 0);
	return r == SDPSHIM_PASS ? sdp_real.__read_chk(fd, buf, n, buflen) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.__read_chk(fd, buf, n, buflen);
	return read_chk_slow(fd, buf, n, buflen);
}

static SDP_COLD ssize_t recv_slow(int fd, void *buf, size_t n, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.recv(fd, buf, n, flags));
	long r = sdp_core_recv(fd, buf, n, flags);
	return r == SDPSHIM_PASS ? sdp_real.recv(fd, buf, n, flags) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.recv(fd, buf, n, flags);
	return recv_slow(fd, buf, n, flags);
}

static SDP_COLD ssize_t recv_chk_slow(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.__recv_chk(fd, buf, n, buflen, flags));
	if (n > buflen)
		return sdp_real.__recv_chk(fd, buf, n, buflen, flags);
	long r = sdp_core_recv(fd, buf, n, flags);
	return r == SDPSHIM_PASS ? sdp_real.__recv_chk(fd, buf, n, buflen, flags) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.__recv_chk(fd, buf, n, buflen, flags);
	return recv_chk_slow(fd, buf, n, buflen, flags);
}

/* TCP reports no source address: the kernel sets the length to 0. */
static ssize_t recvfrom_result(long r, struct sockaddr *addr, socklen_t *len)
{
	if (r >= 0 && addr != NULL && len != NULL)
		*len = 0;
	return sdp_result(r, 0);
}

static SDP_COLD ssize_t recvfrom_slow(int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *len)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.recvfrom(fd, buf, n, flags, addr, len));
	long r = sdp_core_recv(fd, buf, n, flags);
	return r == SDPSHIM_PASS ? sdp_real.recvfrom(fd, buf, n, flags, addr, len) : recvfrom_result(r, addr, len);
}

SDP_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags, struct sockaddr *restrict addr,
			    socklen_t *restrict len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.recvfrom(fd, buf, n, flags, addr, len);
	return recvfrom_slow(fd, buf, n, flags, addr, len);
}

static SDP_COLD ssize_t recvfrom_chk_slow(int fd, void *buf, size_t n, size_t buflen, int flags,
					  struct sockaddr *addr, socklen_t *len)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.__recvfrom_chk(fd, buf, n, buflen, flags, addr, len));
	if (n > buflen)
		return sdp_real.__recvfrom_chk(fd, buf, n, buflen, flags, addr, len);
	long r = sdp_core_recv(fd, buf, n, flags);
	return r == SDPSHIM_PASS ? sdp_real.__recvfrom_chk(fd, buf, n, buflen, flags, addr, len)
				 : recvfrom_result(r, addr, len);
}

SDP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *addr,
				  socklen_t *len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.__recvfrom_chk(fd, buf, n, buflen, flags, addr, len);
	return recvfrom_chk_slow(fd, buf, n, buflen, flags, addr, len);
}

static SDP_COLD ssize_t readv_slow(int fd, const struct iovec *iov, int cnt)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.readv(fd, iov, cnt));
	if (cnt < 0 || cnt > UIO_MAXIOV)
		return sdp_fail(EINVAL);
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
	long r = sdp_core_recvmsg(fd, &m, 0);
	return r == SDPSHIM_PASS ? sdp_real.readv(fd, iov, cnt) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.readv(fd, iov, cnt);
	return readv_slow(fd, iov, cnt);
}

static SDP_COLD ssize_t recvmsg_slow(int fd, struct msghdr *m, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.recvmsg(fd, m, flags));
	long r = sdp_core_recvmsg(fd, m, flags);
	return r == SDPSHIM_PASS ? sdp_real.recvmsg(fd, m, flags) : sdp_result(r, 0);
}

SDP_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.recvmsg(fd, m, flags);
	return recvmsg_slow(fd, m, flags);
}

static int64_t ts_ns(const struct timespec *t) { return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec; }

/* recvmmsg on a stream socket, as the kernel runs it: one recvmsg per entry;
 * MSG_WAITFORONE turns on MSG_DONTWAIT after the first; the timeout is
 * checked after each entry and updated with the time left; an error after
 * the first entry ends the batch. */
static SDP_COLD int recvmmsg_slow(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.recvmmsg(fd, v, n, flags, t));
	if (t != NULL && (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000L))
		return (int)sdp_fail(EINVAL);
	int64_t deadline = t != NULL ? sdp_now_ns() + ts_ns(t) : 0;
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	unsigned int i;
	for (i = 0; i < n; i++) {
		long r = sdp_core_recvmsg(fd, &v[i].msg_hdr, flags);
		if (r == SDPSHIM_PASS && i == 0)
			return sdp_real.recvmmsg(fd, v, n, flags, t);
		if (r < 0) {
			if (i == 0)
				return (int)sdp_result(r == SDPSHIM_PASS ? -EIO : r, 0);
			break;
		}
		v[i].msg_len = (unsigned int)r;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (t != NULL && sdp_now_ns() >= deadline) {
			i++;
			break;
		}
	}
	if (t != NULL) {
		int64_t left = deadline - sdp_now_ns();
		if (left < 0)
			left = 0;
		t->tv_sec = left / 1000000000LL;
		t->tv_nsec = left % 1000000000LL;
	}
	return (int)i;
}

SDP_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.recvmmsg(fd, v, n, flags, t);
	return recvmmsg_slow(fd, v, n, flags, t);
}

