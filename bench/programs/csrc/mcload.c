/*
 * mcload: a memcached load generator and checker speaking the text
 * protocol (set/get) over N connections, one thread each, plain blocking
 * sockets like any client. Every connection owns its keys; it first sets
 * each of them, then runs a mix of gets and sets (-r gets per set) and
 * checks every value a get returns against the last one it set. Values are
 * pseudo-random bytes derived from (connection, key, version), so a
 * corrupted, stale or misplaced value is caught.
 *
 *   mcload -p PORT [-a ADDR] [-c CONNS] [-n OPS | -d SECONDS] [-s SIZE]
 *          [-k KEYS] [-r GETS_PER_SET]
 *
 * Prints one JSON line: {"conns":..,"ops":..,"gets":..,"sets":..,
 * "seconds":..,"ops_per_sec":..,"errors":..}. Exit status 0 only when
 * every operation succeeded and every value checked.
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

struct opts {
	const char *addr;
	int port, conns, keys, size, ratio;
	long ops;	/* per connection, when > 0 */
	double seconds; /* else run this long */
};

struct worker {
	pthread_t th;
	const struct opts *o;
	int id, fd;
	long ops, gets, sets, errors;
	char *msg; /* the first error */
	/* receive buffer */
	char *rbuf;
	size_t rcap, rlen, roff;
	uint32_t *version;
	char *val, *got;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(struct worker *w, const char *what)
{
	w->errors++;
	if (!w->msg) {
		w->msg = malloc(256);
		snprintf(w->msg, 256, "conn %d: %s", w->id, what);
	}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* fill reads more bytes into the buffer; -1 on EOF or error. */
static int fill(struct worker *w)
{
	if (w->roff > 0 && w->roff == w->rlen)
		w->roff = w->rlen = 0;
	if (w->rlen == w->rcap) {
		if (w->roff > 0) {
			memmove(w->rbuf, w->rbuf + w->roff, w->rlen - w->roff);
			w->rlen -= w->roff;
			w->roff = 0;
		} else {
			w->rcap *= 2;
			w->rbuf = realloc(w->rbuf, w->rcap);
		}
	}
	for (;;) {
		ssize_t k = recv(w->fd, w->rbuf + w->rlen, w->rcap - w->rlen, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		w->rlen += (size_t)k;
		return 0;
	}
}

/* line returns the next CRLF-terminated line (NUL-terminated in place,
 * without the CRLF), or NULL on EOF. */
static char *line(struct worker *w)
{
	for (;;) {
		char *start = w->rbuf + w->roff;
		size_t avail = w->rlen - w->roff;
		char *cr = avail ? memmem(start, avail, "\r\n", 2) : NULL;
		if (cr) {
			*cr = 0;
			w->roff += (size_t)(cr - start) + 2;
			return start;
		}
		if (fill(w) < 0)
			return NULL;
	}
}

/* take copies n bytes from the stream into dst. */
static int take(struct worker *w, char *dst, size_t n)
{
	while (n > 0) {
		if (w->roff == w->rlen && fill(w) < 0)
			return -1;
		size_t k = w->rlen - w->roff;
		if (k > n)
			k = n;
		memcpy(dst, w->rbuf + w->roff, k);
		w->roff += k;
		dst += k;
		n -= k;
	}
	return 0;
}

/* value fills the value of (conn, key, version). */
static void value(char *p, int size, int conn, int key, uint32_t version)
{
	uint64_t x = ((uint64_t)conn << 40) ^ ((uint64_t)key << 20) ^ version ^ 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (char)(x >> 24);
	}
}

static int do_set(struct worker *w, int key)
{
	const struct opts *o = w->o;
	char hdr[96];
	uint32_t v = ++w->version[key];
	value(w->val, o->size, w->id, key, v);
	int h = snprintf(hdr, sizeof hdr, "set k%d_%d 0 0 %d\r\n", w->id, key, o->size);
	memcpy(w->val + o->size, "\r\n", 2);
	if (send_all(w->fd, hdr, (size_t)h) < 0 || send_all(w->fd, w->val, (size_t)o->size + 2) < 0) {
		fail(w, "send failed");
		return -1;
	}
	char *l = line(w);
	if (!l) {
		fail(w, "connection closed awaiting STORED");
		return -1;
	}
	if (strcmp(l, "STORED") != 0) {
		fail(w, "set not STORED");
		return -1;
	}
	w->sets++;
	return 0;
}

static int do_get(struct worker *w, int key)
{
	const struct opts *o = w->o;
	char req[64], want[96];
	int h = snprintf(req, sizeof req, "get k%d_%d\r\n", w->id, key);
	if (send_all(w->fd, req, (size_t)h) < 0) {
		fail(w, "send failed");
		return -1;
	}
	char *l = line(w);
	snprintf(want, sizeof want, "VALUE k%d_%d 0 %d", w->id, key, o->size);
	if (!l || strcmp(l, want) != 0) {
		fail(w, l ? "unexpected get reply header" : "connection closed awaiting VALUE");
		return -1;
	}
	if (take(w, w->got, (size_t)o->size + 2) < 0) {
		fail(w, "connection closed in a value");
		return -1;
	}
	value(w->val, o->size, w->id, key, w->version[key]);
	if (memcmp(w->got, w->val, (size_t)o->size) != 0 || memcmp(w->got + o->size, "\r\n", 2) != 0) {
		fail(w, "value differs from the one set");
		return -1;
	}
	l = line(w);
	if (!l || strcmp(l, "END") != 0) {
		fail(w, "no END after the value");
		return -1;
	}
	w->gets++;
	return 0;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
	inet_pton(AF_INET, o->addr, &sa.sin_addr);
	w->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		fail(w, strerror(errno));
		return NULL;
	}
	int one = 1;
	setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (int k = 0; k < o->keys; k++)
		if (do_set(w, k) < 0)
			goto out;
	double end = now() + o->seconds;
	uint64_t x = 88172645463325252ull + (uint64_t)w->id;
	for (long i = 0; o->ops > 0 ? i < o->ops : (i & 63) || now() < end; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int key = (int)(x % (uint64_t)o->keys);
		int r = (x >> 32) % (uint64_t)(o->ratio + 1) == 0 ? do_set(w, key) : do_get(w, key);
		if (r < 0)
			goto out;
		w->ops++;
	}
out:
	close(w->fd);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: mcload -p PORT [-a ADDR] [-c CONNS] [-n OPS | -d SECONDS] [-s SIZE] [-k KEYS] [-r GETS_PER_SET]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {.addr = "127.0.0.1", .conns = 4, .keys = 64, .size = 100, .ratio = 9, .ops = 0, .seconds = 1};
	int c;
	while ((c = getopt(argc, argv, "a:p:c:n:d:s:k:r:")) != -1) {
		switch (c) {
		case 'a': o.addr = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 'c': o.conns = atoi(optarg); break;
		case 'n': o.ops = atol(optarg); break;
		case 'd': o.seconds = atof(optarg); break;
		case 's': o.size = atoi(optarg); break;
		case 'k': o.keys = atoi(optarg); break;
		case 'r': o.ratio = atoi(optarg); break;
		default: usage();
		}
	}
	if (o.port <= 0 || o.conns <= 0 || o.keys <= 0 || o.size <= 0 || o.ratio < 0)
		usage();
	struct worker *ws = calloc((size_t)o.conns, sizeof *ws);
	double t0 = now();
	for (int i = 0; i < o.conns; i++) {
		struct worker *w = &ws[i];
		w->o = &o;
		w->id = i;
		w->rcap = (size_t)o.size + 4096;
		w->rbuf = malloc(w->rcap);
		w->version = calloc((size_t)o.keys, sizeof *w->version);
		w->val = malloc((size_t)o.size + 2);
		w->got = malloc((size_t)o.size + 2);
		if (pthread_create(&w->th, NULL, run, w) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	long ops = 0, gets = 0, sets = 0, errors = 0;
	for (int i = 0; i < o.conns; i++) {
		pthread_join(ws[i].th, NULL);
		ops += ws[i].ops;
		gets += ws[i].gets;
		sets += ws[i].sets;
		errors += ws[i].errors;
		if (ws[i].msg)
			fprintf(stderr, "mcload: %s\n", ws[i].msg);
	}
	double secs = now() - t0;
	printf("{\"conns\":%d,\"ops\":%ld,\"gets\":%ld,\"sets\":%ld,\"seconds\":%.6f,\"ops_per_sec\":%.1f,\"errors\":%ld}\n",
	       o.conns, ops, gets, sets, secs, ops / secs, errors);
	return errors ? 1 : 0;
}
