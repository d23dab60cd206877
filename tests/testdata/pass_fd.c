/* An accelerated connection handed to another process by SCM_RIGHTS.
 *
 *   pass_fd receiver PATH
 *       Listens on the unix socket PATH, prints "ready", takes one fd in an
 *       SCM_RIGHTS message and echoes on it until EOF, then prints "ok N"
 *       (the bytes it echoed).
 *   pass_fd holder PATH
 *       Listens on TCP (loopback, ephemeral port), prints "port N", accepts
 *       one connection, reads a 64-byte request and sends it back (the
 *       connection has carried bytes both ways), then sends the fd to the
 *       receiver at PATH and closes its own copy.
 *   pass_fd holder PATH sendmmsg
 *       The same, the fd sent by sendmmsg (one message).
 *
 * The client is fork_echo's (fork_echo client PORT BYTES SEED): it checks
 * every byte of the echo and the EOF. The receiver reads the kernel socket
 * it was given, so the holder's shim must have made the connection plain
 * kernel TCP before the fd left (the pass hook). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "pass_fd[%d]: %s: %s\n", (int)getpid(), what, strerror(errno));
	exit(1);
}

static struct sockaddr_un unix_addr(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	return a;
}

static int receiver(const char *path)
{
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = unix_addr(path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
		die("unix listen");
	printf("ready\n");
	fflush(stdout);
	int u = accept(l, NULL, NULL);
	if (u < 0)
		die("unix accept");
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	if (recvmsg(u, &m, 0) != 1)
		die("recvmsg");
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS)
		die("no fd received");
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	static char buf[65536];
	long total = 0;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				die("write");
			off += w;
		}
		total += r;
	}
	close(fd);
	printf("ok %ld\n", total);
	return 0;
}

static int holder(const char *path, int mmsg)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		die("listen");
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		die("accept");
	char req[64];
	for (size_t have = 0; have < sizeof req;) {
		ssize_t r = read(c, req + have, sizeof req - have);
		if (r <= 0)
			die("read request");
		have += (size_t)r;
	}
	if (write(c, req, sizeof req) != (ssize_t)sizeof req)
		die("write request back");
	int u = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un ua = unix_addr(path);
	if (u < 0 || connect(u, (struct sockaddr *)&ua, sizeof ua))
		die("unix connect");
	char byte = 'F';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &c, sizeof c);
	if (mmsg) {
		struct mmsghdr v = {.msg_hdr = m};
		if (sendmmsg(u, &v, 1, 0) != 1 || v.msg_len != 1)
			die("sendmmsg");
	} else if (sendmsg(u, &m, 0) != 1) {
		die("sendmsg");
	}
	close(c);
	close(u);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "receiver") == 0)
		return receiver(argv[2]);
	if (argc == 3 && strcmp(argv[1], "holder") == 0)
		return holder(argv[2], 0);
	if (argc == 4 && strcmp(argv[1], "holder") == 0 && strcmp(argv[3], "sendmmsg") == 0)
		return holder(argv[2], 1);
	fprintf(stderr, "usage: pass_fd receiver PATH | pass_fd holder PATH [sendmmsg]\n");
	return 2;
}
