/* soak - a checksummed soak as an ordinary sockets program (no knowledge
 * of sdpshim): random-length messages both ways over connections that
 * open and close, half-closes, writes of 1-8 MiB among small ones, and
 * every byte each end receives compared with what the other end was to
 * send.
 *
 *   soak server PORT STALL [prefork]
 *       Listens on 127.0.0.1:PORT, prints "ready" and serves each
 *       connection on a thread of its own until its standard input ends;
 *       then prints its report and exits. prefork: a fork child holds the
 *       listener until the server exits, as a pre-fork server's workers
 *       do (a listener shared with fork children, whose connections a
 *       shim cannot give to any process in advance).
 *   soak client PORT SEED SECONDS CONNS PARALLEL STALL
 *       Runs connections, PARALLEL at a time, until CONNS have run (0: no
 *       limit) or SECONDS have passed; then prints its report and exits.
 *       Connection i's seed comes from SEED and i.
 *
 * A connection opens with a 16-byte header, "SOAK", 4 zero bytes and the
 * connection's seed (8 bytes, host order). Both ends derive the plan from
 * the seed: its pattern, its rounds (1-16) and each message's length each
 * way (1 B to 64 KiB, spread over the powers of two; one in sixteen 1-8
 * MiB, written in one call). The patterns:
 *   D  duplex: both ends write all their messages at once (a writer
 *      thread each), shut down their writing side, and read to EOF;
 *   H  half-close: the client writes all and shuts down its writing side;
 *      the server reads to EOF, then writes all its messages and closes
 *      (after shutting down its writing side in half the connections);
 *      the client reads to EOF;
 *   P  ping-pong: round after round the client writes a message and the
 *      server answers with one; then the client shuts down its writing
 *      side, the server sees EOF and closes, the client sees EOF.
 * Byte o of a direction's stream is byte o%8 of word o/8 of the
 * splitmix64 sequence of the direction's key, so a reader checks
 * whatever it reads at once. Reads take random sizes (1 B to 1 MiB);
 * reads and writes go through read/recv/readv/recvmsg and
 * write/send/writev/sendmsg at random.
 *
 * Every connection is watched: one that moves no byte for STALL seconds
 * is a hang; it is counted and shut down both ways, so that its threads
 * return. A client whose hung connection's thread has not returned STALL
 * seconds later counts it stuck and no longer waits for it.
 *
 * A report is one JSON line: connections run and completed (no problem),
 * bytes each way, mismatches (wrong bytes, a stream short or long, a bad
 * header), hangs, errors (a call failed: ECONNRESET, connection refused)
 * and, for a client, stuck connections. A connection counts one problem
 * at most. The first problems are described on stderr. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../../programs/csrc/forkhold.h"

#define MAXROUNDS 16
#define BIG_MIN (1u << 20)
#define BIG_MAX (8u << 20)
#define CHUNK (1u << 20) /* the largest read */
#define HEADER 16
#define MAXSAID 20 /* problems described on stderr */

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "soak: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- the byte streams and the plan ---- */

#define GOLDEN 0x9e3779b97f4a7c15ULL

static uint64_t fin(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* next is splitmix64: the next number of the sequence whose state is *s. */
static uint64_t next(uint64_t *s)
{
	*s += GOLDEN;
	return fin(*s);
}

/* pattern writes bytes [off, off+n) of the stream keyed k to b. */
static void pattern(char *b, uint64_t k, uint64_t off, size_t n)
{
	while (n > 0) {
		uint64_t w = fin(k + (off / 8 + 1) * GOLDEN);
		size_t at = off % 8, m = 8 - at;
		if (m > n)
			m = n;
		memcpy(b, (char *)&w + at, m);
		b += m, off += m, n -= m;
	}
}

struct plan {
	char pattern; /* D, H or P */
	int rounds;
	int closeonly;                  /* H: the server closes without shutdown */
	uint32_t len[2][MAXROUNDS];     /* [0] client to server, [1] server to client */
	uint64_t key[2], total[2], most[2];
};

static uint32_t msglen(uint64_t *s)
{
	if (next(s) % 16 == 0)
		return BIG_MIN + (uint32_t)(next(s) % (BIG_MAX - BIG_MIN + 1));
	uint32_t span = 1u << (next(s) % 17);
	return 1 + (uint32_t)(next(s) % span);
}

static void plan_of(uint64_t seed, struct plan *p)
{
	uint64_t s = seed;
	p->pattern = "DHP"[next(&s) % 3];
	p->rounds = 1 + (int)(next(&s) % MAXROUNDS);
	p->closeonly = (int)(next(&s) % 2);
	for (int d = 0; d < 2; d++) {
		p->key[d] = next(&s);
		p->total[d] = p->most[d] = 0;
		for (int r = 0; r < p->rounds; r++) {
			p->len[d][r] = msglen(&s);
			p->total[d] += p->len[d][r];
			if (p->len[d][r] > p->most[d])
				p->most[d] = p->len[d][r];
		}
	}
}

/* ---- connections, counters and the watchdog ---- */

struct conn {
	int fd, side; /* side 0: the client, 1: the server; it writes direction side */
	int lport, pport; /* its ports, this end's and the peer's (read for a problem's description) */
	uint64_t seed;
	struct plan plan;
	uint64_t written, read; /* stream offsets: the writer's, the reader's */
	uint64_t wrng, rrng;    /* sizes and calls: the writer's, the reader's */
	char *wbuf, *rbuf, *xbuf;
	size_t wlen;
	_Atomic int64_t progress; /* when a byte last moved (ns) */
	int64_t hung_at;          /* under mu */
	atomic_int tid;           /* the thread that runs the conversation */
	atomic_int hung, failed;
	pthread_mutex_t fdmu; /* open: the fd is still this connection's */
	int open;
	int abandoned;              /* under mu: a client stopped waiting for it */
	struct conn *prev, *next; /* under mu: the watched connections */
};

static const char *who = "soak";
static int64_t stall_ns;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ended = PTHREAD_COND_INITIALIZER;
static struct conn watched = {.prev = &watched, .next = &watched};
static int active; /* under mu: a client's connections running, less those given up */
static atomic_ullong n_conns, n_completed, n_mismatch, n_hang, n_error, n_stuck, n_said, bytes_out, bytes_in;

/* ports notes c's ports while its fd is still its own (fdmu, as queues). */
static void ports(struct conn *c)
{
	struct sockaddr_in a;
	socklen_t al = sizeof a;
	pthread_mutex_lock(&c->fdmu);
	if (c->open && getsockname(c->fd, (struct sockaddr *)&a, &al) == 0)
		c->lport = ntohs(a.sin_port);
	al = sizeof a;
	if (c->open && getpeername(c->fd, (struct sockaddr *)&a, &al) == 0)
		c->pport = ntohs(a.sin_port);
	pthread_mutex_unlock(&c->fdmu);
}

static void say(struct conn *c, const char *fmt, va_list ap)
{
	if (atomic_fetch_add(&n_said, 1) >= MAXSAID)
		return;
	if (c->lport == 0)
		ports(c);
	char msg[512], stamp[32];
	vsnprintf(msg, sizeof msg, fmt, ap);
	time_t t = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof stamp, "%H:%M:%S", gmtime_r(&t, &tm));
	if (c->plan.rounds == 0) /* a server's connection before its header */
		fprintf(stderr, "soak %s: connection: %s\n", who, msg);
	else
		fprintf(stderr, "soak %s: %s connection %016llx (port %d to %d; %c, %d rounds, %llu B out, %llu B in): %s\n",
			who, stamp, (unsigned long long)c->seed, c->lport, c->pport, c->plan.pattern, c->plan.rounds,
			(unsigned long long)c->plan.total[c->side], (unsigned long long)c->plan.total[!c->side], msg);
}

static void shut(struct conn *c)
{
	pthread_mutex_lock(&c->fdmu);
	if (c->open)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->fdmu);
}

enum { MISMATCH, ERROR };

/* problem counts c's first problem (none after a hang) and ends c: a
 * shutdown both ways makes its other thread and its peer return. */
static void problem(struct conn *c, int kind, const char *fmt, ...)
{
	if (atomic_load(&c->hung) || atomic_exchange(&c->failed, 1))
		return;
	atomic_fetch_add(kind == MISMATCH ? &n_mismatch : &n_error, 1);
	va_list ap;
	va_start(ap, fmt);
	say(c, fmt, ap);
	va_end(ap);
	shut(c);
}

/* hang describes a hang (watch counts it). */
static void hang(struct conn *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(c, fmt, ap);
	va_end(ap);
}

static char *area(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

/* newconn makes a connection of side with its read buffers (mapped, not
 * malloc'ed, so that the program's RSS returns after it). */
static struct conn *newconn(int side, int fd, uint64_t seed)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		die("calloc");
	c->side = side, c->fd = fd, c->open = 1, c->seed = seed;
	pthread_mutex_init(&c->fdmu, NULL);
	c->wrng = seed ^ 0x5772697465ULL ^ (uint64_t)side << 40;
	c->rrng = seed ^ 0x52656164ULL ^ (uint64_t)side << 40;
	c->rbuf = area(CHUNK);
	c->xbuf = area(CHUNK);
	atomic_store(&c->progress, now_ns());
	return c;
}

/* enlist puts c under watch. Called with mu held. */
static void enlist(struct conn *c)
{
	c->prev = watched.prev, c->next = &watched;
	watched.prev->next = c, watched.prev = c;
}

/* planned gives c its plan from its seed, and its write buffer. */
static void planned(struct conn *c)
{
	plan_of(c->seed, &c->plan);
	c->wlen = c->plan.most[c->side] > HEADER ? c->plan.most[c->side] : HEADER;
	c->wbuf = area(c->wlen);
}

/* endconn closes c, counts it when it had no problem, leaves the watch
 * (and a client's running count) and frees it. */
static void endconn(struct conn *c)
{
	pthread_mutex_lock(&c->fdmu);
	if (c->fd >= 0)
		close(c->fd);
	c->open = 0;
	pthread_mutex_unlock(&c->fdmu);
	if (!atomic_load(&c->hung) && !atomic_load(&c->failed))
		atomic_fetch_add(&n_completed, 1);
	pthread_mutex_lock(&mu);
	c->prev->next = c->next, c->next->prev = c->prev;
	if (c->side == 0 && !c->abandoned)
		active--;
	pthread_cond_broadcast(&ended);
	pthread_mutex_unlock(&mu);
	munmap(c->rbuf, CHUNK);
	munmap(c->xbuf, CHUNK);
	if (c->wbuf)
		munmap(c->wbuf, c->wlen);
	pthread_mutex_destroy(&c->fdmu);
	free(c);
}

/* queues reads c's socket's queues for a hang's description: the bytes a
 * read would take now (FIONREAD) and those the peer has not read yet
 * (SIOCOUTQ); -1 each when c's fd is closed or the call fails. Bytes
 * waiting on a reader that sleeps point at a lost wakeup; none, at bytes
 * that never arrived. */
static void queues(struct conn *c, int *in, int *out)
{
	*in = *out = -1;
	pthread_mutex_lock(&c->fdmu);
	if (c->open) {
		if (ioctl(c->fd, FIONREAD, in) != 0)
			*in = -1;
		if (ioctl(c->fd, SIOCOUTQ, out) != 0)
			*out = -1;
	}
	pthread_mutex_unlock(&c->fdmu);
}

/* where describes what thread tid waits in (a hang's description): its
 * system call and first argument (/proc/self/task/TID/syscall) and, when
 * that is an address, the mapping it lies in and the offset: a futex word
 * in a shared area, or a descriptor polled. */
static void where(int tid, char *out, size_t n)
{
	char path[64], line[256] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (f == NULL || fgets(line, sizeof line, f) == NULL) {
		snprintf(out, n, "thread %d: no system call known", tid);
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	long nr = -1;
	unsigned long a0 = 0;
	if (sscanf(line, "%ld %lx", &nr, &a0) < 2) {
		snprintf(out, n, "thread %d: %.*s", tid, (int)strcspn(line, "\n"), line);
		return;
	}
	snprintf(out, n, "thread %d in system call %ld, first argument %#lx", tid, nr, a0);
	if ((f = fopen("/proc/self/maps", "r")) == NULL)
		return;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a0 >= lo && a0 < hi) {
			size_t k = strlen(out);
			snprintf(out + k, n - k, " (offset %#lx in the mapping %.*s)", a0 - lo, (int)strcspn(line, "\n"), line);
			break;
		}
	}
	fclose(f);
}

/* watch ends the connections that moved nothing for the stall limit
 * (hangs) and returns how many hung ones have not ended a stall limit
 * after. Called with mu held. */
static int watch(void)
{
	int64_t t = now_ns();
	int stuck = 0;
	for (struct conn *c = watched.next; c != &watched; c = c->next) {
		if (atomic_load(&c->hung)) {
			if (!c->abandoned && t - c->hung_at > stall_ns)
				stuck++;
			continue;
		}
		if (atomic_load(&c->failed))
			continue; /* counted, and shut down already */
		if (t - atomic_load(&c->progress) <= stall_ns)
			continue;
		atomic_store(&c->hung, 1);
		c->hung_at = t;
		atomic_fetch_add(&n_hang, 1);
		int in, out;
		queues(c, &in, &out);
		char at[400];
		where(atomic_load(&c->tid), at, sizeof at);
		hang(c, "no byte moved for %lld s (written %llu, read %llu; readable now %d, unread by the peer %d; %s): a hang, shut down",
		     (long long)(stall_ns / 1000000000), (unsigned long long)c->written, (unsigned long long)c->read, in, out, at);
		shut(c);
	}
	return stuck;
}

static void report(void)
{
	printf("{\"conns\":%llu,\"completed\":%llu,\"bytes_out\":%llu,\"bytes_in\":%llu,\"mismatches\":%llu,\"hangs\":%llu,"
	       "\"errors\":%llu,\"stuck\":%llu}\n",
	       atomic_load(&n_conns), atomic_load(&n_completed), atomic_load(&bytes_out), atomic_load(&bytes_in),
	       atomic_load(&n_mismatch), atomic_load(&n_hang), atomic_load(&n_error), atomic_load(&n_stuck));
	fflush(stdout);
}

/* ---- moving and checking bytes ---- */

static void moved(struct conn *c, ssize_t n, atomic_ullong *count)
{
	atomic_store(&c->progress, now_ns());
	atomic_fetch_add(count, (unsigned long long)n);
}

/* put writes all n bytes of b, each call of a random kind. */
static int put(struct conn *c, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t r;
		uint64_t how = next(&c->wrng);
		switch (how % 4) {
		case 0:
			r = write(c->fd, b, n);
			break;
		case 1:
			r = send(c->fd, b, n, MSG_NOSIGNAL);
			break;
		case 2: {
			size_t h = (size_t)((how >> 8) % (n + 1));
			struct iovec v[2] = {{(void *)b, h}, {(void *)(b + h), n - h}};
			r = writev(c->fd, v, 2);
			break;
		}
		default: {
			struct iovec v = {(void *)b, n};
			struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
			r = sendmsg(c->fd, &m, MSG_NOSIGNAL);
		}
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			problem(c, ERROR, "write of %zu bytes at %llu: %s", n, (unsigned long long)c->written,
				r < 0 ? strerror(errno) : "returned 0");
			return -1;
		}
		moved(c, r, &bytes_out);
		b += r, n -= (size_t)r;
	}
	return 0;
}

/* get reads at most n bytes into b, with a call of a random kind. */
static ssize_t get(struct conn *c, char *b, size_t n)
{
	uint64_t how = next(&c->rrng);
	switch (how % 4) {
	case 0:
		return read(c->fd, b, n);
	case 1:
		return recv(c->fd, b, n, 0);
	case 2: {
		size_t h = (size_t)((how >> 8) % (n + 1));
		struct iovec v[2] = {{b, h}, {b + h, n - h}};
		return readv(c->fd, v, 2);
	}
	default: {
		struct iovec v = {b, n};
		struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
		return recvmsg(c->fd, &m, 0);
	}
	}
}

/* readsize is a read's size: up to 16 B, 4 KiB or CHUNK at random, at
 * most left. */
static size_t readsize(struct conn *c, uint64_t left)
{
	uint64_t r = next(&c->rrng);
	uint64_t n = r % 8 == 0 ? 1 + (r >> 8) % 16 : r % 8 < 4 ? 1 + (r >> 8) % 4096 : CHUNK;
	return (size_t)(n < left ? n : left);
}

/* header exchanges the connection's first 16 bytes: the client sends
 * them, the server reads them and learns the seed. */
static int header(struct conn *c)
{
	char h[HEADER] = "SOAK";
	if (c->side == 0) {
		memcpy(h + 8, &c->seed, 8);
		return put(c, h, HEADER);
	}
	for (size_t got = 0; got < HEADER;) {
		ssize_t r = get(c, h + got, HEADER - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			problem(c, ERROR, "read of the header: %s", strerror(errno));
			return -1;
		}
		if (r == 0) {
			problem(c, MISMATCH, "EOF after %zu bytes of the header", got);
			return -1;
		}
		moved(c, r, &bytes_in);
		got += (size_t)r;
	}
	if (memcmp(h, "SOAK\0\0\0\0", 8) != 0) {
		problem(c, MISMATCH, "bad header");
		return -1;
	}
	memcpy(&c->seed, h + 8, 8);
	return 0;
}

/* message writes c's message of round r. */
static int message(struct conn *c, int r)
{
	uint32_t n = c->plan.len[c->side][r];
	pattern(c->wbuf, c->plan.key[c->side], c->written, n);
	if (put(c, c->wbuf, n))
		return -1;
	c->written += n;
	return 0;
}

/* take reads the next n bytes of the peer's stream and checks them;
 * with n 0 it expects EOF. */
static int take(struct conn *c, uint64_t n)
{
	int d = !c->side;
	do {
		size_t want = n == 0 ? 1 + next(&c->rrng) % 64 : readsize(c, n);
		ssize_t r = get(c, c->rbuf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			problem(c, ERROR, "read at %llu: %s", (unsigned long long)c->read, strerror(errno));
			return -1;
		}
		if (r == 0) {
			if (n == 0)
				return 0;
			problem(c, MISMATCH, "EOF at %llu, %llu bytes short", (unsigned long long)c->read, (unsigned long long)n);
			return -1;
		}
		moved(c, r, &bytes_in);
		if (n == 0) {
			problem(c, MISMATCH, "%zd bytes after the stream's end at %llu", r, (unsigned long long)c->read);
			return -1;
		}
		pattern(c->xbuf, c->plan.key[d], c->read, (size_t)r);
		if (memcmp(c->rbuf, c->xbuf, (size_t)r) != 0) {
			ssize_t i = 0;
			while (c->rbuf[i] == c->xbuf[i])
				i++;
			problem(c, MISMATCH, "byte %llu is %02x, want %02x", (unsigned long long)(c->read + (uint64_t)i),
				(unsigned char)c->rbuf[i], (unsigned char)c->xbuf[i]);
			return -1;
		}
		c->read += (uint64_t)r;
		n -= (uint64_t)r;
	} while (n > 0);
	return 0;
}

static int halfclose(struct conn *c)
{
	if (shutdown(c->fd, SHUT_WR)) {
		problem(c, ERROR, "shutdown(SHUT_WR): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* writeall writes every message of c's side, then shuts its writing side
 * down: D's writer thread. */
static void *writeall(void *arg)
{
	struct conn *c = arg;
	for (int r = 0; r < c->plan.rounds; r++)
		if (message(c, r))
			return NULL;
	halfclose(c);
	return NULL;
}

/* converse runs c's plan after the header, from c's side. */
static void converse(struct conn *c)
{
	struct plan *p = &c->plan;
	int in = !c->side;
	switch (p->pattern) {
	case 'D': {
		pthread_t w;
		if (pthread_create(&w, NULL, writeall, c))
			die("pthread_create");
		if (take(c, p->total[in]) == 0)
			take(c, 0);
		pthread_join(w, NULL);
		break;
	}
	case 'H':
		if (c->side == 0) {
			writeall(c);
			if (!atomic_load(&c->failed) && !atomic_load(&c->hung) && take(c, p->total[in]) == 0)
				take(c, 0);
			break;
		}
		if (take(c, p->total[in]) || take(c, 0))
			break;
		for (int r = 0; r < p->rounds; r++)
			if (message(c, r))
				return;
		if (!p->closeonly)
			halfclose(c);
		break;
	default:
		for (int r = 0; r < p->rounds; r++) {
			int fail = c->side == 0 ? message(c, r) || take(c, p->len[in][r]) : take(c, p->len[in][r]) || message(c, r);
			if (fail)
				return;
		}
		if (c->side == 0 && halfclose(c))
			return;
		take(c, 0);
	}
}

/* ---- server ---- */

static void *serve(void *arg)
{
	struct conn *c = arg;
	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	if (header(c) == 0) {
		planned(c);
		converse(c);
	}
	endconn(c);
	return NULL;
}

static void *watchdog(void *arg)
{
	for (;; usleep(250000)) {
		pthread_mutex_lock(&mu);
		watch();
		pthread_mutex_unlock(&mu);
	}
	return arg;
}

/* untilstdin reports and exits when the standard input ends, once the
 * connections it served have ended: a client counts a duplex connection
 * completed when it read the server's end, while the last bytes it wrote
 * may still be on their way to the server's reader (a hung one ends
 * within STALL, by the watchdog; the wait is bounded by twice that). */
static void *untilstdin(void *arg)
{
	(void)arg;
	char b[64];
	while (read(0, b, sizeof b) > 0 || errno == EINTR)
		;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	int64_t ns = until.tv_nsec + 2 * stall_ns + 1000000000LL;
	until.tv_sec += ns / 1000000000LL;
	until.tv_nsec = ns % 1000000000LL;
	pthread_mutex_lock(&mu);
	while (watched.next != &watched && pthread_cond_timedwait(&ended, &mu, &until) == 0)
		;
	pthread_mutex_unlock(&mu);
	report();
	exit(0);
}

static int nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int server(int port, int prefork)
{
	who = "server";
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128))
		die("listen");
	if (prefork && hold_in_child())
		die("fork");
	pthread_t t;
	if (pthread_create(&t, NULL, watchdog, NULL) || pthread_create(&t, NULL, untilstdin, NULL))
		die("pthread_create");
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			/* Out of fds or memory: counted, and the server goes on. */
			atomic_fetch_add(&n_error, 1);
			if (atomic_fetch_add(&n_said, 1) < MAXSAID)
				fprintf(stderr, "soak server: accept: %s\n", strerror(errno));
			usleep(10000);
			continue;
		}
		atomic_fetch_add(&n_conns, 1);
		struct conn *c = newconn(1, nodelay(fd), 0);
		pthread_mutex_lock(&mu);
		enlist(c);
		pthread_mutex_unlock(&mu);
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, serve, c))
			die("pthread_create");
		pthread_attr_destroy(&at);
	}
}

/* ---- client ---- */

static int port;

static void *run(void *arg)
{
	struct conn *c = arg;
	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(c->fd, (struct sockaddr *)&a, sizeof a))
		problem(c, ERROR, "connect: %s", strerror(errno));
	else if (header(c) == 0)
		converse(c);
	endconn(c);
	return NULL;
}

static int client(uint64_t seed, double secs, uint64_t conns, int parallel)
{
	who = "client";
	int64_t end = now_ns() + (int64_t)(secs * 1e9);
	uint64_t launched = 0;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&mu);
	for (;;) {
		int more = (conns == 0 || launched < conns) && now_ns() < end;
		while (more && active < parallel) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd < 0)
				die("socket");
			struct conn *c = newconn(0, nodelay(fd), fin(seed + ++launched * GOLDEN));
			planned(c);
			enlist(c);
			atomic_fetch_add(&n_conns, 1);
			active++;
			pthread_t t;
			if (pthread_create(&t, &at, run, c))
				die("pthread_create");
			more = (conns == 0 || launched < conns) && now_ns() < end;
		}
		if (active == 0 && !more)
			break;
		if (watch() > 0) {
			/* Give up on hung connections whose threads did not
			 * return: counted stuck, no longer waited for. */
			int64_t t = now_ns();
			for (struct conn *c = watched.next; c != &watched; c = c->next)
				if (atomic_load(&c->hung) && !c->abandoned && t - c->hung_at > stall_ns) {
					c->abandoned = 1;
					active--;
					atomic_fetch_add(&n_stuck, 1);
				}
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_sec++, ts.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&ended, &mu, &ts);
	}
	pthread_mutex_unlock(&mu);
	report();
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if ((argc == 4 || (argc == 5 && strcmp(argv[4], "prefork") == 0)) && strcmp(argv[1], "server") == 0) {
		stall_ns = (int64_t)(atof(argv[3]) * 1e9);
		return server(atoi(argv[2]), argc == 5);
	}
	if (argc == 8 && strcmp(argv[1], "client") == 0) {
		port = atoi(argv[2]);
		stall_ns = (int64_t)(atof(argv[7]) * 1e9);
		return client(strtoull(argv[3], NULL, 0), atof(argv[4]), strtoull(argv[5], NULL, 0), atoi(argv[6]));
	}
	fprintf(stderr, "usage: soak server PORT STALL [prefork] | soak client PORT SEED SECONDS CONNS PARALLEL STALL\n");
	return 2;
}
