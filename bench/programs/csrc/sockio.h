/* sockio.h - what the benchmarks' plain sockets programs share: fail
 * loudly, move a whole buffer, turn Nagle off, and serve one echoed
 * connection. Header-only: each
 * program is one file compiled on its own (bench/programs embeds this
 * beside its .c files; bench/seed003's tenants.c includes it by path). */
#ifndef SDPSHIM_BENCH_SOCKIO_H
#define SDPSHIM_BENCH_SOCKIO_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static __attribute__((noreturn)) void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Reads (rd) or writes all n bytes of b; -1 on EOF or an error. */
static int full(int fd, char *b, size_t n, int rd)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = rd ? read(fd, b + done, n - done) : write(fd, b + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Serves the next connection on the listener l as the connection-setup
 * programs do: reads n bytes into b, echoes them, reads to EOF, closes.
 * -1 when the echo failed (the connection is closed all the same). */
static inline int echo_conn(int l, char *b, size_t n)
{
	int c;
	while ((c = accept(l, NULL, NULL)) < 0)
		if (errno != EINTR && errno != ECONNABORTED)
			die("accept");
	int r = full(c, b, n, 1) || full(nodelay(c), b, n, 0) ? -1 : 0;
	char rest[256];
	while (r == 0 && read(c, rest, sizeof rest) > 0)
		;
	close(c);
	return r;
}

#endif
