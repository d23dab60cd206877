/*
 * closerange - a host program that, once its TCP connection is up, closes
 * every descriptor it did not open itself, as daemons and process
 * supervisors do (close_range over everything but stdio and the one socket
 * it keeps), and then goes on using the connection.
 *
 *   closerange server [-p PORT] [-b BYTES]
 *       listens on 127.0.0.1 (port 0: any), prints
 *       {"event":"listening","port":N}, accepts one connection
 *   closerange client -p PORT [-b BYTES]
 *       connects to 127.0.0.1:PORT
 *
 * Both ends: a 64-byte hello each way (the connection is set up, and
 * accelerated when both run under the shim), then close_range over [3, fd)
 * and (fd, ~0U] where fd is the connection, then BYTES (default 8 MiB) of a
 * pattern from client to server, checked byte by byte, then 2000 64-byte
 * round trips, then an orderly shutdown (EOF each way). Prints one JSON
 * line {"role":R,"ok":true,"kernel_bytes":N} where kernel_bytes is the
 * payload the kernel's TCP received on the socket (about 0 when
 * accelerated). Exit status 0 when everything passed, 1 otherwise (the
 * failed step on stderr); it kills itself with SIGALRM after 60 s rather
 * than hang.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "closerange %s: line %d: ", role, __LINE__);       \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));        \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static const char *role = "?";

static unsigned char pattern(uint64_t i) { return (unsigned char)(i * 13 + i / 509); }

static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k > 0, "write %zu bytes", n);
		p += k;
		n -= (size_t)k;
	}
}

/* read_full reads exactly n bytes; 0 at EOF before the first byte. */
static size_t read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, p + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k >= 0, "read %zu bytes", n - got);
		if (k == 0) {
			CHECK(got == 0, "EOF after %zu of %zu bytes", got, n);
			return 0;
		}
		got += (size_t)k;
	}
	return got;
}

/* close_others closes every descriptor above stdio but fd. The wrapper is
 * glibc's when it has one; the raw system call would bypass the shim's
 * interposer, so the call goes through the symbol the dynamic linker
 * resolves (libsdpshim.so's under LD_PRELOAD). */
extern int close_range(unsigned int first, unsigned int last, int flags) __attribute__((weak));

static void close_others(int fd)
{
	CHECK(close_range != NULL, "this libc has no close_range");
	if (fd > 3)
		CHECK(close_range(3, (unsigned int)fd - 1, 0) == 0, "close_range(3, %d)", fd - 1);
	CHECK(close_range((unsigned int)fd + 1, ~0U, 0) == 0, "close_range(%d, ~0U)", fd + 1);
}

static void hello(int fd, int first)
{
	char buf[64], want[64];
	memset(want, 'h', sizeof want);
	if (first)
		write_all(fd, want, sizeof want);
	CHECK(read_full(fd, buf, sizeof buf) == sizeof buf && memcmp(buf, want, sizeof buf) == 0, "hello");
	if (!first)
		write_all(fd, want, sizeof want);
}

static void bulk_send(int fd, uint64_t n)
{
	static unsigned char buf[65536];
	uint64_t off = 0;
	while (off < n) {
		size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		k = k > 1 + off % 60000 ? 1 + off % 60000 : k; /* varied sizes */
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i);
		write_all(fd, buf, k);
		off += k;
	}
}

static void bulk_recv(int fd, uint64_t n)
{
	static unsigned char buf[65536];
	uint64_t off = 0;
	while (off < n) {
		size_t want = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
		ssize_t k = read(fd, buf, want);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k > 0, "bulk read at byte %llu of %llu", (unsigned long long)off, (unsigned long long)n);
		for (ssize_t i = 0; i < k; i++)
			CHECK(buf[i] == pattern(off + (uint64_t)i), "bulk byte %llu differs",
			      (unsigned long long)(off + (uint64_t)i));
		off += (uint64_t)k;
	}
}

static void round_trips(int fd, int client, int n)
{
	char buf[64];
	for (int i = 0; i < n; i++) {
		if (client) {
			memset(buf, (char)i, sizeof buf);
			write_all(fd, buf, sizeof buf);
			CHECK(read_full(fd, buf, sizeof buf) == sizeof buf && buf[0] == (char)(i + 1) &&
				      buf[63] == (char)(i + 1),
			      "round trip %d answer", i);
		} else {
			CHECK(read_full(fd, buf, sizeof buf) == sizeof buf && buf[0] == (char)i && buf[63] == (char)i,
			      "round trip %d request", i);
			memset(buf, (char)(i + 1), sizeof buf);
			write_all(fd, buf, sizeof buf);
		}
	}
}

static void finish(int fd)
{
	char c;
	CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
	CHECK(read_full(fd, &c, 1) == 0, "EOF from the peer");
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	memset(&ti, 0, sizeof ti);
	CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0, "TCP_INFO");
	printf("{\"role\":\"%s\",\"ok\":true,\"kernel_bytes\":%llu}\n", role,
	       (unsigned long long)ti.tcpi_bytes_received);
	fflush(stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
		fprintf(stderr, "usage: closerange server|client [-p PORT] [-b BYTES]\n");
		return 2;
	}
	role = argv[1];
	int port = 0;
	uint64_t bytes = 8 << 20;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "-p") == 0)
			port = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-b") == 0)
			bytes = strtoull(argv[i + 1], NULL, 10);
	}
	alarm(60);
	int client = strcmp(role, "client") == 0;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd;
	if (client) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fd >= 0, "socket");
		CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to port %d", port);
	} else {
		int ls = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(ls >= 0, "socket");
		int one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		CHECK(bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0, "bind");
		CHECK(listen(ls, 4) == 0, "listen");
		socklen_t sl = sizeof sa;
		CHECK(getsockname(ls, (struct sockaddr *)&sa, &sl) == 0, "getsockname");
		printf("{\"event\":\"listening\",\"port\":%d}\n", ntohs(sa.sin_port));
		fflush(stdout);
		fd = accept(ls, NULL, NULL);
		CHECK(fd >= 0, "accept");
		close(ls);
	}
	hello(fd, client);
	close_others(fd);
	if (client)
		bulk_send(fd, bytes);
	else
		bulk_recv(fd, bytes);
	round_trips(fd, client, 2000);
	finish(fd);
	return 0;
}
