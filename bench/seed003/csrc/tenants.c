/* tenants - PeRF's application types as ordinary sockets programs (no
 * knowledge of sdpshim): the connections of one client process (or of
 * one process per tenant) to one server process, so that under
 * SDPSHIM_CHANNEL=shared a client process's connections are streams of
 * one channel.
 *
 *   tenants server PORT
 *       Accepts connections until killed, one thread each. A connection
 *       opens with one byte naming its type:
 *         'B'  B_App: reads until EOF.
 *         'D'  D_App: echoes 16-byte messages until EOF.
 *         'M'  M_App: reads batches of 32 16-byte messages, answers each
 *              batch with one 16-byte message, until EOF.
 *   tenants client PORT SECONDS TYPE[:COUNT]...
 *       Runs every connection for SECONDS: B (1 MiB writes), D (16-byte
 *       ping-pong, each round trip timed) or M (batches of 32 16-byte
 *       writes, each answered); COUNT connections of a type (default 1)
 *       form one tenant. The first 10% of the time is a warm-up whose
 *       figures are not kept. Prints one JSON line: per tenant, in the
 *       order given, its type, bytes moved, messages and, for D, the
 *       round trip's p50 and p99 in microseconds.
 *   tenants line
 *       Prints the machine's cache-line round trip in ns (two threads
 *       bouncing one line), as {"line_ns":N}.
 *   tenants clients PORT SECONDS TYPE[:COUNT]...
 *       The same with each tenant in a process of its own (forked before
 *       it connects), all started on one clock: different tenants to the
 *       shim, as PeRF's tenants are different applications. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../programs/csrc/sockio.h"

#define SMALL 16
#define BATCH 32
#define BULK (1 << 20)
#define MAXT 8
#define MAXC 64
#define MAXLAT (1 << 22)


static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- server ---- */

static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char type;
	if (full(c, &type, 1, 1))
		goto out;
	static __thread char b[BULK];
	for (;;) {
		if (type == 'B') {
			ssize_t r = read(c, b, BULK);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
		} else if (type == 'D') {
			if (full(c, b, SMALL, 1) || full(c, b, SMALL, 0))
				break;
		} else if (type == 'M') {
			if (full(c, b, SMALL * BATCH, 1) || full(c, b, SMALL, 0))
				break;
		} else {
			break;
		}
	}
out:
	close(c);
	return NULL;
}

static int server(int port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128))
		die("listen");
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		pthread_t t;
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)nodelay(c)))
			die("pthread_create");
		pthread_detach(t);
	}
}

/* ---- client ---- */

struct conn {
	int fd;
	char type;
	uint64_t bytes, msgs;
	float *lat; /* D: round trips in microseconds */
	size_t nlat;
};

/* The run's clock, shared with the tenants' processes (clients). */
struct clock {
	double warm, end;
	atomic_int go, ready;
};

/* One tenant's figures. */
struct result {
	char type;
	int conns;
	uint64_t bytes, msgs;
	float p50, p99; /* D only; 0 otherwise */
	size_t nlat;
};

static struct clock *clk;

static void *run(void *arg)
{
	struct conn *c = arg;
	static __thread char b[BULK];
	memset(b, 'x', sizeof b);
	while (!atomic_load(&clk->go))
		;
	for (;;) {
		double t0 = now();
		if (t0 >= clk->end)
			break;
		int keep = t0 >= clk->warm;
		if (c->type == 'B') {
			if (full(c->fd, b, BULK, 0))
				die("bulk write");
			if (keep)
				c->bytes += BULK, c->msgs++;
		} else if (c->type == 'D') {
			if (full(c->fd, b, SMALL, 0) || full(c->fd, b, SMALL, 1))
				die("ping-pong");
			if (keep) {
				c->bytes += SMALL, c->msgs++;
				if (c->nlat < MAXLAT)
					c->lat[c->nlat++] = (float)((now() - t0) * 1e6);
			}
		} else {
			for (int i = 0; i < BATCH; i++)
				if (full(c->fd, b, SMALL, 0))
					die("batch write");
			if (full(c->fd, b, SMALL, 1))
				die("batch answer");
			if (keep)
				c->bytes += SMALL * BATCH, c->msgs += BATCH;
		}
	}
	shutdown(c->fd, SHUT_WR);
	while (read(c->fd, b, sizeof b) > 0)
		;
	return NULL;
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Parses a tenant's spec into its type and connection count; 0 when bad. */
static int parse_spec(const char *spec, char *type, int *k)
{
	*type = spec[0];
	*k = spec[1] == ':' ? atoi(spec + 2) : (spec[1] == 0 ? 1 : 0);
	return (*type == 'B' || *type == 'D' || *type == 'M') && *k >= 1 && *k <= MAXC;
}

/* Opens conns[0..k) of type to port, each announced by its type byte. */
static void open_conns(struct conn *conns, int k, char type, int port)
{
	for (int i = 0; i < k; i++) {
		struct conn *c = &conns[i];
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		c->fd = nodelay(socket(AF_INET, SOCK_STREAM, 0));
		if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a))
			die("connect");
		c->type = type;
		if (type == 'D' && !(c->lat = malloc(sizeof(float) * MAXLAT)))
			die("malloc");
		if (full(c->fd, &type, 1, 0))
			die("hello");
	}
}

/* Runs conns[0..n) on threads of their own to the clock's end. */
static void run_conns(struct conn *conns, int n)
{
	pthread_t th[MAXC];
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, run, &conns[i]))
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

/* Sums a tenant's connections conns[0..k) into r. */
static void sum(struct result *r, struct conn *conns, int k)
{
	r->type = conns[0].type;
	r->conns = k;
	r->bytes = r->msgs = 0;
	r->nlat = 0;
	for (int i = 0; i < k; i++) {
		r->bytes += conns[i].bytes, r->msgs += conns[i].msgs;
		if (conns[i].type == 'D') {
			memmove(conns[0].lat + r->nlat, conns[i].lat, conns[i].nlat * sizeof(float));
			r->nlat += conns[i].nlat;
		}
	}
	if (r->nlat > 0) {
		qsort(conns[0].lat, r->nlat, sizeof(float), cmpf);
		r->p50 = conns[0].lat[r->nlat / 2];
		r->p99 = conns[0].lat[r->nlat * 99 / 100];
	}
}

static void start_clock(double secs)
{
	double t0 = now();
	clk->warm = t0 + secs * 0.1;
	clk->end = t0 + secs;
	atomic_store(&clk->go, 1);
}

/* Runs the tenants given for secs: in this process, or (procs) each in a
 * process of its own, so that they are different tenants to the shim too;
 * prints their figures. */
static int client(int port, double secs, int ntypes, char **specs, int procs)
{
	static struct conn conns[MAXC];
	char type[MAXT];
	int count[MAXT], n = 0;
	if (ntypes > MAXT)
		ntypes = MAXT;
	for (int t = 0; t < ntypes; t++) {
		if (!parse_spec(specs[t], &type[t], &count[t]) || n + count[t] > MAXC) {
			fprintf(stderr, "tenants: bad tenant %s\n", specs[t]);
			return 2;
		}
		n += count[t];
	}
	size_t shared = sizeof(struct clock) + sizeof(struct result) * MAXT;
	void *m = mmap(NULL, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		die("mmap");
	clk = m;
	struct result *res = (struct result *)(clk + 1);
	if (!procs) {
		for (int t = 0, at = 0; t < ntypes; at += count[t], t++)
			open_conns(conns + at, count[t], type[t], port);
		start_clock(secs);
		run_conns(conns, n);
		for (int t = 0, at = 0; t < ntypes; at += count[t], t++)
			sum(&res[t], conns + at, count[t]);
	} else {
		pid_t kids[MAXT];
		for (int t = 0; t < ntypes; t++) {
			if ((kids[t] = fork()) < 0)
				die("fork");
			if (kids[t] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL); /* the client killed: its tenants too */
				if (getppid() == 1)
					_exit(1);
				open_conns(conns, count[t], type[t], port);
				atomic_fetch_add(&clk->ready, 1);
				while (!atomic_load(&clk->go))
					usleep(200);
				run_conns(conns, count[t]);
				sum(&res[t], conns, count[t]);
				_exit(0);
			}
		}
		/* Every tenant connected, or one failed (it said why) or took
		 * more than 20 s: then none runs. */
		int bad = 0;
		for (double give_up = now() + 20; !bad && atomic_load(&clk->ready) < ntypes; usleep(200))
			for (int t = 0; t < ntypes; t++)
				if (waitpid(kids[t], NULL, WNOHANG) != 0 || now() > give_up)
					bad = 1;
		if (!bad)
			start_clock(secs);
		for (int t = 0; t < ntypes; t++) {
			int st;
			if (bad)
				kill(kids[t], SIGKILL);
			if (waitpid(kids[t], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				bad = 1;
		}
		if (bad) {
			fprintf(stderr, "tenants: a tenant's process failed\n");
			return 1;
		}
	}
	printf("{\"seconds\":%.3f,\"tenants\":[", secs * 0.9);
	for (int t = 0; t < ntypes; t++) {
		struct result *r = &res[t];
		printf("%s{\"type\":\"%c\",\"conns\":%d,\"bytes\":%llu,\"msgs\":%llu", t ? "," : "", r->type, r->conns,
		       (unsigned long long)r->bytes, (unsigned long long)r->msgs);
		if (r->nlat > 0)
			printf(",\"p50_us\":%.2f,\"p99_us\":%.2f", r->p50, r->p99);
		printf("}");
	}
	printf("]}\n");
	return 0;
}

/* ---- line ---- */

/* The machine's cache-line round trip: two threads bounce one line
 * (no sockets, no system calls). A spell in which the VM makes this
 * slow slows every shared-memory path with it. */
static _Alignas(64) atomic_uint ball;
#define LINE_TRIPS 1000000

static void *line_peer(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < LINE_TRIPS; i++) {
		while (atomic_load(&ball) != 2 * i + 1)
			;
		atomic_store(&ball, 2 * i + 2);
	}
	return NULL;
}

static int line(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, line_peer, NULL))
		die("pthread_create");
	double t0 = now();
	for (unsigned i = 0; i < LINE_TRIPS; i++) {
		atomic_store(&ball, 2 * i + 1);
		while (atomic_load(&ball) != 2 * i + 2)
			;
	}
	double t1 = now();
	pthread_join(t, NULL);
	printf("{\"line_ns\":%.1f}\n", (t1 - t0) * 1e9 / LINE_TRIPS);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "line") == 0)
		return line();
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	if (argc >= 5 && (strcmp(argv[1], "client") == 0 || strcmp(argv[1], "clients") == 0))
		return client(atoi(argv[2]), atof(argv[3]), argc - 4, argv + 4, strcmp(argv[1], "clients") == 0);
	fprintf(stderr, "usage: tenants server PORT | tenants client|clients PORT SECONDS TYPE[:COUNT]... | tenants line\n");
	return 2;
}
