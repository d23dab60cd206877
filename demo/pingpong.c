/*
 * pingpong - TCP request/echo latency, written like any plain sockets
 * application (it knows nothing of sdpshim).
 *
 *   pingpong server [-a ADDR] [-p PORT]
 *       Listens (port 0 = any free port), prints {"event":"listening",...}
 *       with the port it got, accepts one connection and echoes every byte
 *       back until the client closes; then prints one JSON result line.
 *
 *   pingpong client [-a ADDR] -p PORT [-s SIZE] [-w WARMUP] [-n COUNT | -t SECONDS]
 *       Sends a SIZE-byte message, waits for the whole echo, and repeats:
 *       WARMUP round trips first (not recorded), then COUNT round trips or
 *       as many as fit in SECONDS. Every echo is compared with what was sent
 *       (each message carries its sequence number), so a transport that
 *       loses, reorders or corrupts bytes fails loudly. Prints one JSON line
 *       with the half round-trip times (RTT/2) in microseconds.
 *
 * TCP_NODELAY is set on both ends, as latency-sensitive programs do. Reads
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

static const char *prog = "pingpong";

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

/* write_all writes len bytes or exits. */
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

/* read_full reads exactly len bytes; returns 0 at a clean EOF before the
 * first byte, exits on an error or an EOF in the middle. */
static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (n == 0) {
			if (got == 0)
				return 0;
			fail("connection closed in the middle of a message");
		}
		got += (size_t)n;
	}
	return 1;
}

static void set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		die("setsockopt TCP_NODELAY");
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
	printf("{\"event\":\"listening\",\"test\":\"pingpong\",\"port\":%u}\n", ntohs(sa.sin_port));
	fflush(stdout);

	int fd;
	do
		fd = accept(ls, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		die("accept");
	close(ls);
	set_nodelay(fd);

	static char buf[256 << 10];
	uint64_t bytes = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (n == 0)
			break;
		write_all(fd, buf, (size_t)n);
		bytes += (uint64_t)n;
	}
	if (close(fd) != 0)
		die("close");
	printf("{\"test\":\"pingpong\",\"role\":\"server\",\"bytes\":%" PRIu64 "}\n", bytes);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* nearest-rank percentile of sorted v[0..n) */
static int64_t pct(const int64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p / 100.0 * (double)n + 0.999999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static int run_client(const char *addr, unsigned long port, size_t size, unsigned long warmup,
		      unsigned long count, double seconds)
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

	char *sbuf = malloc(size), *rbuf = malloc(size);
	size_t cap = count ? count : 1 << 16, n = 0;
	int64_t *rtt = malloc(cap * sizeof *rtt);
	if (!sbuf || !rbuf || !rtt)
		fail("out of memory");
	for (size_t i = 0; i < size; i++)
		sbuf[i] = (char)(i * 7 + 3);

	int64_t start = 0, deadline = 0;
	for (uint64_t seq = 0;; seq++) {
		if (seq == warmup) {
			start = now_ns();
			deadline = start + (int64_t)(seconds * 1e9);
		}
		/* the sequence number at both ends of the message */
		memcpy(sbuf, &seq, size < sizeof seq ? size : sizeof seq);
		if (size >= 2 * sizeof seq)
			memcpy(sbuf + size - sizeof seq, &seq, sizeof seq);

		int64_t t0 = now_ns();
		write_all(fd, sbuf, size);
		if (!read_full(fd, rbuf, size))
			fail("server closed the connection");
		int64_t t1 = now_ns();
		if (memcmp(sbuf, rbuf, size) != 0) {
			fprintf(stderr, "%s: echo of message %" PRIu64 " differs from what was sent\n", prog, seq);
			exit(1);
		}
		if (seq < warmup)
			continue;
		if (n == cap) {
			cap *= 2;
			rtt = realloc(rtt, cap * sizeof *rtt);
			if (!rtt)
				fail("out of memory");
		}
		rtt[n++] = t1 - t0;
		if (count ? n == count : t1 >= deadline)
			break;
	}
	double elapsed = (double)(now_ns() - start) / 1e9;
	if (close(fd) != 0)
		die("close");

	qsort(rtt, n, sizeof *rtt, cmp_i64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)rtt[i];
	/* half round trip, microseconds */
#define HALF_US(x) ((double)(x) / 2000.0)
	printf("{\"test\":\"pingpong\",\"role\":\"client\",\"size\":%zu,\"warmup\":%lu,\"count\":%zu,"
	       "\"seconds\":%.6f,\"half_rtt_p50_us\":%.3f,\"half_rtt_p99_us\":%.3f,"
	       "\"half_rtt_mean_us\":%.3f,\"half_rtt_min_us\":%.3f,\"half_rtt_max_us\":%.3f}\n",
	       size, warmup, n, elapsed, HALF_US(pct(rtt, n, 50)), HALF_US(pct(rtt, n, 99)),
	       HALF_US(sum / (double)n), HALF_US(rtt[0]), HALF_US(rtt[n - 1]));
	free(sbuf);
	free(rbuf);
	free(rtt);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s server [-a ADDR] [-p PORT]\n"
		"       %s client [-a ADDR] -p PORT [-s SIZE] [-w WARMUP] [-n COUNT | -t SECONDS]\n",
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
	unsigned long port = 0, size = 64, warmup = 100, count = 0;
	double seconds = 0;
	int have_port = 0, opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "a:p:s:w:n:t:")) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'p': port = parse_num(optarg, "-p", 0, 65535); have_port = 1; break;
		case 's': size = parse_num(optarg, "-s", 1, MAX_SIZE); break;
		case 'w': warmup = parse_num(optarg, "-w", 0, 100000000); break;
		case 'n': count = parse_num(optarg, "-n", 1, 100000000); break;
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
	return run_client(addr, port, size, warmup, count, seconds);
}
