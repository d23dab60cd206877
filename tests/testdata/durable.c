/* Durability of sent bytes: one end of a TCP connection dies, the other
 * reports what it got. The same program runs over kernel TCP and under
 * the shim; tests/durable_test.go compares the two columns.
 *
 *   durable server ACTION...      listens on 127.0.0.1:0, prints
 *                                 {"port":N}, waits for a line on stdin,
 *                                 accepts, prints {"accepted":1}, acts
 *   durable group-server ACTION...
 *                                 the same, with a fork child that holds
 *                                 the listener until the server exits (a
 *                                 pre-fork server's listener: the shim
 *                                 defers its connections)
 *   durable client PORT ACTION... connects, prints {"connected":1}, waits
 *                                 for a line on stdin, acts
 *
 * ACTION:
 *   read [N]               sends N bytes first (default 0), which the peer
 *                          may leave unread; then reads to the end; prints
 *                          {"read":N,"sum":H,"end":"eof"|ERRNO}
 *   write SIZE DELAY_MS NB [unread]
 *                          (unread: first waits until bytes arrived, and
 *                          never reads them) writes SIZE bytes of a fixed
 *                          pattern (NB 1: nonblocking, stops at the first
 *                          EAGAIN), prints
 *                          {"sent":N,"sum":H} (H: FNV-1a of the N bytes),
 *                          sleeps DELAY_MS and kills itself (SIGKILL)
 *   hold                   waits until bytes are readable, reads none and
 *                          kills itself: a reader dies with unread data
 *   writeprobe SIZE        writes SIZE bytes, prints {"sent":N}, waits for
 *                          a line on stdin (the peer is dead), then tries
 *                          recv, send and recv again and prints each
 *                          result: {"recv1":R,"send":S,"recv2":R2}, where a
 *                          result is a byte count or an errno name
 *
 * Output goes through write(2) at once, so a line printed before the
 * SIGKILL is never lost in a stdio buffer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/programs/csrc/forkhold.h"

static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = write(1, line + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			exit(3);
		off += w;
	}
}

static void die(const char *what)
{
	fprintf(stderr, "durable: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* waitline blocks until the test writes a line on stdin. */
static void waitline(void)
{
	char c;
	ssize_t r;
	while ((r = read(0, &c, 1)) == 1 && c != '\n')
		;
	if (r < 0)
		die("stdin");
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV0 0xcbf29ce484222325ULL

static unsigned char pattern(uint64_t i)
{
	return (unsigned char)((i * 131) ^ (i >> 9) ^ (i >> 17));
}

static const char *errname(int e)
{
	switch (e) {
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case EAGAIN: return "EAGAIN";
	case ENOTCONN: return "ENOTCONN";
	case ETIMEDOUT: return "ETIMEDOUT";
	default: return "other";
	}
}

static void wait_in(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			die("poll");
}

static void do_read(int fd, size_t first)
{
	static unsigned char buf[65536];
	uint64_t h = FNV0, n = 0;
	memset(buf, 'u', first < sizeof buf ? first : sizeof buf);
	if (first > 0 && send(fd, buf, first < sizeof buf ? first : sizeof buf, MSG_NOSIGNAL) < 0)
		die("send first");
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			say("{\"read\":%llu,\"sum\":\"%016llx\",\"end\":\"%s\"}", (unsigned long long)n,
			    (unsigned long long)h, errname(errno));
			return;
		}
		if (r == 0) {
			say("{\"read\":%llu,\"sum\":\"%016llx\",\"end\":\"eof\"}", (unsigned long long)n,
			    (unsigned long long)h);
			return;
		}
		h = fnv(h, buf, r);
		n += r;
	}
}

/* send_all writes size bytes of the pattern; nb: stop at EAGAIN. It
 * returns how many bytes the kernel (or the shim) took, their sum in *h. */
static uint64_t send_all(int fd, uint64_t size, int nb, uint64_t *h)
{
	static unsigned char buf[65536];
	uint64_t n = 0;
	*h = FNV0;
	if (nb && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die("fcntl");
	while (n < size) {
		size_t k = size - n < sizeof buf ? size - n : sizeof buf;
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(n + i);
		ssize_t w = send(fd, buf, k, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && nb && errno == EAGAIN)
			break;
		if (w < 0)
			die("send");
		*h = fnv(*h, buf, w);
		n += w;
	}
	return n;
}

static void do_write(int fd, uint64_t size, int delay_ms, int nb, int unread)
{
	uint64_t h;
	if (unread)
		wait_in(fd);
	uint64_t n = send_all(fd, size, nb, &h);
	say("{\"sent\":%llu,\"sum\":\"%016llx\"}", (unsigned long long)n, (unsigned long long)h);
	if (delay_ms > 0) {
		struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	raise(SIGKILL);
}

static void do_hold(int fd)
{
	wait_in(fd);
	raise(SIGKILL);
}

static void result(char *out, size_t cap, ssize_t r)
{
	if (r < 0)
		snprintf(out, cap, "\"%s\"", errname(errno));
	else
		snprintf(out, cap, "%zd", r);
}

static void do_writeprobe(int fd, uint64_t size)
{
	uint64_t h;
	uint64_t n = send_all(fd, size, 0, &h);
	say("{\"sent\":%llu}", (unsigned long long)n);
	waitline();
	char b[16], r1[32], s[32], r2[32];
	result(r1, sizeof r1, recv(fd, b, sizeof b, 0));
	result(s, sizeof s, send(fd, "x", 1, MSG_NOSIGNAL));
	result(r2, sizeof r2, recv(fd, b, sizeof b, 0));
	say("{\"recv1\":%s,\"send\":%s,\"recv2\":%s}", r1, s, r2);
}

static void act(int fd, int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "read"))
		do_read(fd, argc >= 2 ? strtoul(argv[1], NULL, 10) : 0);
	else if (argc >= 4 && !strcmp(argv[0], "write"))
		do_write(fd, strtoull(argv[1], NULL, 10), atoi(argv[2]), atoi(argv[3]),
			 argc >= 5 && !strcmp(argv[4], "unread"));
	else if (argc >= 1 && !strcmp(argv[0], "hold"))
		do_hold(fd);
	else if (argc >= 2 && !strcmp(argv[0], "writeprobe"))
		do_writeprobe(fd, strtoull(argv[1], NULL, 10));
	else {
		fprintf(stderr, "durable: bad action\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	int group = argc >= 3 && !strcmp(argv[1], "group-server");
	if (argc >= 3 && (group || !strcmp(argv[1], "server"))) {
		int l = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t al = sizeof a;
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 16) ||
		    getsockname(l, (struct sockaddr *)&a, &al))
			die("listen");
		if (group && hold_in_child())
			die("fork");
		say("{\"port\":%d}", ntohs(a.sin_port));
		waitline();
		int c = accept(l, NULL, NULL);
		if (c < 0)
			die("accept");
		say("{\"accepted\":1}");
		act(c, argc - 2, argv + 2);
		return 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "client")) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					.sin_port = htons(atoi(argv[2]))};
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))
			die("connect");
		say("{\"connected\":1}");
		waitline();
		act(c, argc - 3, argv + 3);
		return 0;
	}
	fprintf(stderr, "usage: durable server ACTION... | durable client PORT ACTION...\n");
	return 2;
}
