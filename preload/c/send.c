/*
 * send.c - the send side: write, writev, send, sendto, sendmsg, sendmmsg,
 * sendfile, sendfile64, splice.
 *
 * Each exported function is a table lookup and a tail call to libc for an
 * UNMANAGED fd; the rest lives in cold functions. For a CANDIDATE or MANAGED
 * fd with the core running it is one hook call (plus a kernel sleep and a
 * new call each time the hook answers SDPSHIM_WAIT, wait.c). PROTECTED fds
 * are not the program's: EBADF.
 */
#include "shim.h"

#include <string.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/uio.h>

_Static_assert(sizeof(off_t) == sizeof(off64_t), "sdpshim supports 64-bit off_t only");

/* ---- send ----------------------------------------------------------------------------------- */

static SDP_COLD ssize_t write_slow(int fd, const void *buf, size_t n)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.write(fd, buf, n));
	long r = sdp_core_send(fd, buf, n, 0);
	return r == SDPSHIM_PASS ? sdp_real.write(fd, buf, n) : sdp_result(r, 1);
}

SDP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.write(fd, buf, n);
	return write_slow(fd, buf, n);
}

static SDP_COLD ssize_t send_slow(int fd, const void *buf, size_t n, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.send(fd, buf, n, flags));
	long r = sdp_core_send(fd, buf, n, flags);
	return r == SDPSHIM_PASS ? sdp_real.send(fd, buf, n, flags) : sdp_result(r, !(flags & MSG_NOSIGNAL));
}

SDP_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.send(fd, buf, n, flags);
	return send_slow(fd, buf, n, flags);
}

static SDP_COLD ssize_t sendto_slow(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
				    socklen_t len)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.sendto(fd, buf, n, flags, addr, len));
	long r;
	if (addr == NULL) {
		r = sdp_core_send(fd, buf, n, flags);
	} else { /* an address matters on TCP only with MSG_FASTOPEN */
		struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
		struct msghdr m = {.msg_name = (void *)addr, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1};
		r = sdp_core_sendmsg(fd, &m, flags);
	}
	return r == SDPSHIM_PASS ? sdp_real.sendto(fd, buf, n, flags, addr, len)
				 : sdp_result(r, !(flags & MSG_NOSIGNAL));
}

SDP_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t len)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.sendto(fd, buf, n, flags, addr, len);
	return sendto_slow(fd, buf, n, flags, addr, len);
}

static SDP_COLD ssize_t writev_slow(int fd, const struct iovec *iov, int cnt)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.writev(fd, iov, cnt));
	if (cnt < 0 || cnt > UIO_MAXIOV)
		return sdp_fail(EINVAL);
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
	long r = sdp_core_sendmsg(fd, &m, 0);
	return r == SDPSHIM_PASS ? sdp_real.writev(fd, iov, cnt) : sdp_result(r, 1);
}

SDP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	if (likely(sdp_fd_plain(fd)))
		return sdp_real.writev(fd, iov, cnt);
	return writev_slow(fd, iov, cnt);
}

static SDP_COLD ssize_t sendmsg_slow(int fd, const struct msghdr *m, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.sendmsg(fd, m, flags));
	long r = sdp_core_sendmsg(fd, m, flags);
	return r == SDPSHIM_PASS ? sdp_real.sendmsg(fd, m, flags) : sdp_result(r, !(flags & MSG_NOSIGNAL));
}

/* Before a message with SCM_RIGHTS leaves: the connections of the MANAGED
 * fds it carries become plain kernel TCP (the core's pass hook). The
 * control buffer is read through process_vm_readv, so a bad pointer gets
 * the kernel's EFAULT from the sendmsg that follows, not a crash here; its
 * first SDP_PASS_CTL bytes are looked at (SCM_MAX_FD descriptors take
 * about 1 KiB). */
#define SDP_PASS_CTL 4096
static void sdp_pass_rights_in(const struct msghdr *um);

static SDP_COLD void sdp_pass_rights(const struct msghdr *um)
{
	if (!sdp_core_ready() || um->msg_controllen < sizeof(struct cmsghdr))
		return;
	int saved = errno;
	sdp_pass_rights_in(um);
	errno = saved;
}

static SDP_COLD void sdp_pass_rights_in(const struct msghdr *um)
{
	union {
		struct cmsghdr align;
		unsigned char b[SDP_PASS_CTL];
	} ctl;
	size_t len = um->msg_controllen < sizeof ctl.b ? um->msg_controllen : sizeof ctl.b;
	struct iovec local = {.iov_base = ctl.b, .iov_len = len}, remote = {.iov_base = um->msg_control, .iov_len = len};
	long got = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1UL, &remote, 1UL, 0UL);
	struct msghdr mc = {.msg_control = ctl.b, .msg_controllen = len};
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) /* a seccomp filter: read in place */
		mc.msg_control = um->msg_control;
	else if (got != (long)len)
		return; /* a bad buffer: the kernel's sendmsg fails with EFAULT */
	const struct msghdr *m = &mc;
	const unsigned char *end = (const unsigned char *)mc.msg_control + len;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		const unsigned char *data = CMSG_DATA(c);
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (n > (size_t)(end - data) / sizeof(int))
			n = (size_t)(end - data) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int pfd;
			memcpy(&pfd, data + i * sizeof(int), sizeof pfd);
			if (sdp_fd_state_look(pfd) == SDPSHIM_FD_MANAGED)
				SDP_CORE_DO(sdp_core.pass(pfd));
		}
	}
}

/* 1 when m may carry MANAGED fds (an SCM_RIGHTS message of a process that
 * has some). The process-wide count comes first: a process without
 * MANAGED or PROTECTED fds never reads the program's msghdr here. */
static inline int sdp_may_pass(const struct msghdr *m)
{
	return unlikely(sdp_fd_any_special()) && m != NULL && m->msg_controllen != 0;
}

SDP_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	if (likely(sdp_fd_plain(fd))) {
		if (sdp_may_pass(m))
			sdp_pass_rights(m);
		return sdp_real.sendmsg(fd, m, flags);
	}
	return sendmsg_slow(fd, m, flags);
}

/* sendmmsg as the kernel runs it: one sendmsg per entry, at most UIO_MAXIOV;
 * an error on the first entry is the result, a later one ends the batch. */
static SDP_COLD int sendmmsg_slow(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	SDP_ROUTE_OR(sdp_route_io(fd), sdp_real.sendmmsg(fd, v, n, flags));
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	unsigned int i;
	for (i = 0; i < n; i++) {
		long r = sdp_core_sendmsg(fd, &v[i].msg_hdr, flags);
		if (r == SDPSHIM_PASS && i == 0)
			return sdp_real.sendmmsg(fd, v, n, flags);
		if (r < 0) {
			if (i == 0)
				return (int)sdp_result(r == SDPSHIM_PASS ? -EIO : r, !(flags & MSG_NOSIGNAL));
			break;
		}
		v[i].msg_len = (unsigned int)r;
	}
	return (int)i;
}

/* sdp_pass_rights for each message of a sendmmsg (as many as the kernel
 * sends at most). */
static SDP_COLD void sdp_pass_rights_all(const struct mmsghdr *v, unsigned int n)
{
	for (unsigned int i = 0; v != NULL && i < n && i < UIO_MAXIOV; i++)
		if (v[i].msg_hdr.msg_controllen != 0)
			sdp_pass_rights(&v[i].msg_hdr);
}

SDP_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	if (likely(sdp_fd_plain(fd))) {
		if (unlikely(sdp_fd_any_special()))
			sdp_pass_rights_all(v, n);
		return sdp_real.sendmmsg(fd, v, n, flags);
	}
	return sendmmsg_slow(fd, v, n, flags);
}

/* ---- sendfile, splice -------------------------------------------------------------------------- */

static SDP_COLD ssize_t sendfile_slow(int out, int in, off_t *off, size_t n, int is64)
{
	SDP_ROUTE_OR(sdp_route2(out, in), is64 ? sdp_real.sendfile64(out, in, (off64_t *)off, n)
					       : sdp_real.sendfile(out, in, off, n));
	long r = sdp_core_sendfile(out, in, off, n);
	if (r == SDPSHIM_PASS)
		return is64 ? sdp_real.sendfile64(out, in, (off64_t *)off, n) : sdp_real.sendfile(out, in, off, n);
	return sdp_result(r, 1);
}

SDP_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (likely(sdp_fd_plain(out) && sdp_fd_plain(in)))
		return sdp_real.sendfile(out, in, off, n);
	return sendfile_slow(out, in, off, n, 0);
}

SDP_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	if (likely(sdp_fd_plain(out) && sdp_fd_plain(in)))
		return sdp_real.sendfile64(out, in, off, n);
	return sendfile_slow(out, in, (off_t *)off, n, 1);
}

static SDP_COLD ssize_t splice_slow(int in, loff_t *oi, int out, loff_t *oo, size_t n, unsigned int f)
{
	SDP_ROUTE_OR(sdp_route2(in, out), sdp_real.splice(in, oi, out, oo, n, f));
	long r = sdp_core_splice(in, oi, out, oo, n, f);
	return r == SDPSHIM_PASS ? sdp_real.splice(in, oi, out, oo, n, f) : sdp_result(r, 1);
}

SDP_EXPORT ssize_t splice(int in, loff_t *oi, int out, loff_t *oo, size_t n, unsigned int f)
{
	if (likely(sdp_fd_plain(in) && sdp_fd_plain(out)))
		return sdp_real.splice(in, oi, out, oo, n, f);
	return splice_slow(in, oi, out, oo, n, f);
}
