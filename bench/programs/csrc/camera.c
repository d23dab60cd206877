/* Seed 000's camera scenario as two plain sockets programs, for pods:
 *
 *   camera send HOST PORT STREAM FRAMES FRAME START_NS INTERVAL_NS
 *   camera recv PORT STREAMS FRAMES FRAME START_NS BIN_NS
 *
 * A sender (one camera) connects and writes FRAMES frames of FRAME bytes,
 * frame k due at START_NS + k*INTERVAL_NS (CLOCK_MONOTONIC, which every
 * namespace shares; the harness spreads the streams' starts over one
 * interval). A frame's first 8 bytes carry the time its write began, the
 * next 8 its stream and frame numbers; the rest is a pattern of both.
 *
 * The receiver (the analytics pod) accepts STREAMS connections, reads
 * each on a thread of its own, checks every byte of every frame, and
 * when all have ended prints one line per frame ("lat NS", the delivery
 * latency: last byte read minus the write's start) and one per bin of
 * BIN_NS from START_NS ("bin I BYTES"), then "frames N". Any error
 * (short stream, wrong byte, wrong count) exits non-zero.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HDR 16

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* ref holds 256 + frame bytes of 0, 1, 2, ...: the body of frame k of
 * stream s is ref from an offset both choose. */
static unsigned char *ref;
static size_t frame;

static size_t body_off(uint32_t s, uint32_t k) { return (s * 31 + k * 17) & 0xff; }

static void make_ref(void)
{
	ref = malloc(frame + 256);
	if (!ref)
		die("malloc");
	for (size_t i = 0; i < frame + 256; i++)
		ref[i] = (unsigned char)i;
}

static int sender(int argc, char **argv)
{
	if (argc != 9)
		return 2;
	const char *host = argv[2];
	int port = atoi(argv[3]);
	uint32_t stream = atoi(argv[4]);
	long frames = atol(argv[5]);
	frame = atol(argv[6]);
	int64_t start = atoll(argv[7]), interval = atoll(argv[8]);
	make_ref();
	unsigned char *buf = malloc(frame);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || !buf)
		die("socket");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return 2;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("connect");
	for (long k = 0; k < frames; k++) {
		int64_t at = start + k * interval;
		struct timespec ts = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		memcpy(buf + HDR, ref + body_off(stream, k) + HDR, frame - HDR);
		int64_t t = now_ns();
		uint32_t sk[2] = {stream, (uint32_t)k};
		memcpy(buf, &t, 8);
		memcpy(buf + 8, sk, 8);
		for (size_t off = 0; off < frame;) {
			ssize_t n = write(fd, buf + off, frame - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("write");
			off += n;
		}
	}
	if (shutdown(fd, SHUT_WR) < 0)
		die("shutdown");
	/* The receiver closes after it has read everything. */
	while (read(fd, buf, frame) > 0)
		;
	close(fd);
	return 0;
}

struct recv_state {
	long frames;
	int64_t start, bin;
	long nbins;
	int64_t *bins; /* bytes per bin, atomically added */
	int64_t *lat;  /* per frame, indexed stream*frames+k */
	int streams;
};

struct conn {
	struct recv_state *st;
	int fd;
	int err;
};

static void *reader(void *arg)
{
	struct conn *c = arg;
	struct recv_state *st = c->st;
	unsigned char *buf = malloc(frame);
	long got_frames = 0;
	int64_t stream = -1;
	for (;;) {
		size_t got = 0;
		while (got < frame) {
			ssize_t n = read(c->fd, buf + got, frame - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				perror("read");
				c->err = 1;
				goto out;
			}
			if (n == 0) {
				if (got != 0) {
					fprintf(stderr, "stream %lld: %zu bytes of a frame at EOF\n", (long long)stream, got);
					c->err = 1;
				}
				goto out;
			}
			int64_t t = now_ns() - st->start;
			if (t >= 0 && t / st->bin < st->nbins)
				__atomic_add_fetch(&st->bins[t / st->bin], n, __ATOMIC_RELAXED);
			got += n;
		}
		int64_t done = now_ns(), sent;
		uint32_t sk[2];
		memcpy(&sent, buf, 8);
		memcpy(sk, buf + 8, 8);
		if (stream < 0)
			stream = sk[0];
		if (sk[0] != stream || sk[0] >= (uint32_t)st->streams || sk[1] != got_frames || got_frames >= st->frames ||
		    memcmp(buf + HDR, ref + body_off(sk[0], sk[1]) + HDR, frame - HDR) != 0) {
			fprintf(stderr, "stream %lld frame %ld: wrong bytes (header %u %u)\n", (long long)stream, got_frames, sk[0], sk[1]);
			c->err = 1;
			goto out;
		}
		st->lat[stream * st->frames + got_frames] = done - sent;
		got_frames++;
	}
out:
	if (!c->err && got_frames != st->frames) {
		fprintf(stderr, "stream %lld: %ld frames of %ld\n", (long long)stream, got_frames, st->frames);
		c->err = 1;
	}
	close(c->fd);
	free(buf);
	return NULL;
}

static int receiver(int argc, char **argv)
{
	if (argc != 8)
		return 2;
	int port = atoi(argv[2]);
	struct recv_state st = {.streams = atoi(argv[3]), .frames = atol(argv[4]), .start = atoll(argv[6]), .bin = atoll(argv[7])};
	frame = atol(argv[5]);
	if (st.streams <= 0 || st.frames <= 0 || frame < HDR || st.bin <= 0)
		return 2;
	make_ref();
	/* Bins for 10 minutes from START_NS, more than any run takes. */
	st.nbins = 600000000000LL / st.bin + 1;
	st.bins = calloc(st.nbins, sizeof *st.bins);
	st.lat = calloc(st.streams * st.frames, sizeof *st.lat);
	struct conn *conns = calloc(st.streams, sizeof *conns);
	pthread_t *th = calloc(st.streams, sizeof *th);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (lfd < 0 || !st.bins || !st.lat || !conns || !th)
		die("setup");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 64) < 0)
		die("listen");
	for (int i = 0; i < st.streams; i++) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		conns[i] = (struct conn){.st = &st, .fd = fd};
		if (pthread_create(&th[i], NULL, reader, &conns[i]) != 0)
			die("pthread_create");
	}
	close(lfd);
	int err = 0;
	for (int i = 0; i < st.streams; i++) {
		pthread_join(th[i], NULL);
		err |= conns[i].err;
	}
	if (err)
		return 1;
	for (long i = 0; i < st.streams * st.frames; i++)
		printf("lat %lld\n", (long long)st.lat[i]);
	long last = st.nbins - 1;
	while (last > 0 && st.bins[last] == 0)
		last--;
	for (long i = 0; i <= last; i++)
		printf("bin %ld %lld\n", i, (long long)st.bins[i]);
	printf("frames %ld\n", st.streams * st.frames);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;
	if (argc > 1 && strcmp(argv[1], "send") == 0)
		rc = sender(argc, argv);
	else if (argc > 1 && strcmp(argv[1], "recv") == 0)
		rc = receiver(argc, argv);
	if (rc == 2)
		fprintf(stderr, "usage: camera send HOST PORT STREAM FRAMES FRAME START_NS INTERVAL_NS\n"
				"       camera recv PORT STREAMS FRAMES FRAME START_NS BIN_NS\n");
	return rc;
}
