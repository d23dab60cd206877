/*
 * stream - one-way TCP throughput, written like any plain sockets
 * application (it knows nothing of sdpshim).
 *
 *   stream server [-a ADDR] [-p PORT]
 *       Listens (port 0 = any free port), prints {"event":"listening",...}
 *       with the port it got, accepts one connection, reads until the
 *       client shuts down its side, checks every byte against the expected
 *       pattern, answers with the byte count, and prints one JSON result
 *       line (MB/s and messages/s as the receiver saw them).
 *
 *   stream client [-a ADDR] -p PORT [-s SIZE] [-n COUNT | -t SECONDS]
 *       Sends a 16-byte hello (magic, message size, pattern seed), then
 *       SIZE-byte messages for SECONDS or COUNT messages, shuts down its
 *       write side and checks that the server received every byte. Prints
 *       one JSON line (the sender's view).
 *
 * The payload is a seeded pseudo-random byte sequence with a prime period
 * (65521 bytes, so it never lines up with message or buffer sizes): a lost,
 * duplicated, reordered or corrupted byte is reported with its offset and
 * the run fails. MB is 10^6 bytes. TCP_NODELAY is set on both ends. Reads
 * and writes handle short counts and EINTR. Exit status 0 on success, 1 on
 * any error (message on stderr), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (16u << 20)
#define PERIOD 65521u /* largest prime below 2^16 */
#define RBUF (256u << 10)
#define MAGIC "SDPDEMO1"

static const char *prog = "stream";

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static void fail(const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		die("clock_gettime");
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		p += n;
		len -= (size_t)n;
	}
}

/* read_full reads exactly len bytes or exits (EOF included). */
static void read_full(int fd, void *buf, size_t len, const char *what)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (n == 0) {
			fprintf(stderr, "%s: connection closed before the %s\n", prog, what);
			exit(1);
		}
		p += n;
		len -= (size_t)n;
	}
}

static void set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		die("setsockopt TCP_NODELAY");
}

/* pattern returns PERIOD+extra bytes: PERIOD seeded pseudo-random bytes,
 * then their repetition, so any window of up to extra bytes starting at
 * offset%PERIOD is contiguous. */
static unsigned char *pattern(uint32_t seed, size_t extra)
{
	unsigned char *p = malloc(PERIOD + extra);
	if (!p)
		fail("out of memory");
	uint32_t x = seed | 1;
	for (size_t i = 0; i < PERIOD; i++) {
		x ^= x << 13; /* xorshift32 */
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)(x >> 24);
	}
	for (size_t i = PERIOD; i < PERIOD + extra; i++)
		p[i] = p[i - PERIOD];
	return p;
}

static unsigned long parse_num(const char *s, const char *flag, unsigned long lo, unsigned long hi)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "%s: %s: expected a number from %lu to %lu, got \"%s\"\n", prog, flag, lo, hi, s);
		exit(2);
	}
	return v;
}

static double parse_seconds(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v > 0 && v <= 3600)) {
		fprintf(stderr, "%s: -t: expected seconds above 0 and at most 3600, got \"%s\"\n", prog, s);
		exit(2);
	}
	return v;
}

static struct sockaddr_in make_addr(const char *addr, unsigned long port)
{
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "%s: -a: not an IPv4 address: \"%s\"\n", prog, addr);
		exit(2);
	}
	return sa;
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_u64(unsigned char *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}

static uint64_t get_u64(const unsigned char *p) { return (uint64_t)get_u32(p) << 32 | get_u32(p + 4); }

static int run_server(const char *addr, unsigned long port)
{
	struct sockaddr_in sa = make_addr(addr, port);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0)
		die("socket");
	int one = 1;
	if (setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
		die("setsockopt SO_REUSEADDR");
	if (bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("bind");
	if (listen(ls, 8) != 0)
		die("listen");
	socklen_t sl = sizeof sa;
	if (getsockname(ls, (struct sockaddr *)&sa, &sl) != 0)
		die("getsockname");
	printf("{\"event\":\"listening\",\"test\":\"stream\",\"port\":%u}\n", ntohs(sa.sin_port));
	fflush(stdout);

	int fd;
	do
		fd = accept(ls, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		die("accept");
	close(ls);
	set_nodelay(fd);

	unsigned char hello[16];
	read_full(fd, hello, sizeof hello, "hello");
	int64_t t0 = now_ns();
	if (memcmp(hello, MAGIC, 8) != 0)
		fail("bad hello: not a stream client");
	uint32_t size = get_u32(hello + 8), seed = get_u32(hello + 12);
	if (size < 1 || size > MAX_SIZE)
		fail("bad hello: message size out of range");
	unsigned char *want = pattern(seed, RBUF);
	unsigned char *buf = malloc(RBUF);
	if (!buf)
		fail("out of memory");

	uint64_t bytes = 0;
	for (;;) {
		ssize_t n = read(fd, buf, RBUF);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (n == 0)
			break;
		const unsigned char *w = want + bytes % PERIOD;
		if (memcmp(buf, w, (size_t)n) != 0) {
			size_t i = 0;
			while (buf[i] == w[i])
				i++;
			fprintf(stderr,
				"%s: data corrupted at stream offset %" PRIu64 ": expected 0x%02x, got 0x%02x\n",
				prog, bytes + i, w[i], buf[i]);
			exit(1);
		}
		bytes += (uint64_t)n;
	}
	double secs = (double)(now_ns() - t0) / 1e9;
	if (bytes % size != 0) {
		fprintf(stderr, "%s: received %" PRIu64 " bytes, not a whole number of %" PRIu32 "-byte messages\n",
			prog, bytes, size);
		exit(1);
	}
	unsigned char ack[8];
	put_u64(ack, bytes);
	write_all(fd, ack, sizeof ack);
	if (close(fd) != 0)
		die("close");
	uint64_t msgs = bytes / size;
	printf("{\"test\":\"stream\",\"role\":\"server\",\"size\":%" PRIu32 ",\"bytes\":%" PRIu64
	       ",\"msgs\":%" PRIu64 ",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"msgs_per_s\":%.1f,\"verified\":true}\n",
	       size, bytes, msgs, secs, secs > 0 ? (double)bytes / secs / 1e6 : 0.0,
	       secs > 0 ? (double)msgs / secs : 0.0);
	free(want);
	free(buf);
	return 0;
}

static int run_client(const char *addr, unsigned long port, size_t size, unsigned long count, double seconds)
{
	struct sockaddr_in sa = make_addr(addr, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	int r;
	do
		r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	while (r != 0 && errno == EINTR);
	if (r != 0)
		die("connect");
	set_nodelay(fd);

	uint32_t seed = (uint32_t)now_ns() ^ (uint32_t)getpid() << 16;
	unsigned char *src = pattern(seed, size);
	unsigned char hello[16];
	memcpy(hello, MAGIC, 8);
	put_u32(hello + 8, (uint32_t)size);
	put_u32(hello + 12, seed);
	write_all(fd, hello, sizeof hello);

	int64_t t0 = now_ns(), deadline = t0 + (int64_t)(seconds * 1e9), t1;
	uint64_t sent = 0, msgs = 0;
	for (;;) {
		write_all(fd, src + sent % PERIOD, size);
		sent += size;
		msgs++;
		t1 = now_ns();
		if (count ? msgs == count : t1 >= deadline)
			break;
	}
	double secs = (double)(t1 - t0) / 1e9;
	if (shutdown(fd, SHUT_WR) != 0)
		die("shutdown");
	unsigned char ack[8];
	read_full(fd, ack, sizeof ack, "server's byte count");
	uint64_t got = get_u64(ack);
	if (got != sent) {
		fprintf(stderr, "%s: sent %" PRIu64 " bytes, the server received %" PRIu64 "\n", prog, sent, got);
		exit(1);
	}
	if (close(fd) != 0)
		die("close");
	printf("{\"test\":\"stream\",\"role\":\"client\",\"size\":%zu,\"bytes\":%" PRIu64 ",\"msgs\":%" PRIu64
	       ",\"seconds\":%.6f,\"mb_per_s\":%.3f,\"msgs_per_s\":%.1f,\"acked\":true}\n",
	       size, sent, msgs, secs, secs > 0 ? (double)sent / secs / 1e6 : 0.0,
	       secs > 0 ? (double)msgs / secs : 0.0);
	free(src);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s server [-a ADDR] [-p PORT]\n"
		"       %s client [-a ADDR] -p PORT [-s SIZE] [-n COUNT | -t SECONDS]\n",
		prog, prog);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	int server = strcmp(argv[1], "server") == 0;
	if (!server && strcmp(argv[1], "client") != 0)
		usage();
	const char *addr = "127.0.0.1";
	unsigned long port = 0, size = 4096, count = 0;
	double seconds = 0;
	int have_port = 0, opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "a:p:s:n:t:")) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'p': port = parse_num(optarg, "-p", 0, 65535); have_port = 1; break;
		case 's': size = parse_num(optarg, "-s", 1, MAX_SIZE); break;
		case 'n': count = parse_num(optarg, "-n", 1, 1000000000); break;
		case 't': seconds = parse_seconds(optarg); break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	signal(SIGPIPE, SIG_IGN); /* a closed peer is an EPIPE error, reported */
	if (server)
		return run_server(addr, port);
	if (!have_port || port == 0 || (count != 0) == (seconds != 0)) {
		fprintf(stderr, "%s client: -p PORT and exactly one of -n COUNT or -t SECONDS are required\n", prog);
		usage();
	}
	return run_client(addr, port, size, count, seconds);
}
