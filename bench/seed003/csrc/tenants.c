/* tenants - PeRF's application types as ordinary sockets programs (no
 * knowledge of sdpshim), all connections of one client process to one
 * server process, so that under SDPSHIM_CHANNEL=shared they are streams
 * of one channel.
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
 *       round trip's p50 and p99 in microseconds. */
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
#include <sys/socket.h>
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

static double t_warm, t_end;
static atomic_int go;

static void *run(void *arg)
{
	struct conn *c = arg;
	static __thread char b[BULK];
	memset(b, 'x', sizeof b);
	while (!atomic_load(&go))
		;
	for (;;) {
		double t0 = now();
		if (t0 >= t_end)
			break;
		int keep = t0 >= t_warm;
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

static int client(int port, double secs, int ntypes, char **specs)
{
	static struct conn conns[MAXC];
	int first[MAXT + 1], n = 0;
	pthread_t th[MAXC];
	if (ntypes > MAXT)
		ntypes = MAXT;
	for (int t = 0; t < ntypes; t++) {
		char type = specs[t][0];
		int k = specs[t][1] == ':' ? atoi(specs[t] + 2) : 1;
		if ((type != 'B' && type != 'D' && type != 'M') || k < 1 || n + k > MAXC) {
			fprintf(stderr, "tenants: bad tenant %s\n", specs[t]);
			return 2;
		}
		first[t] = n;
		for (int i = 0; i < k; i++, n++) {
			struct conn *c = &conns[n];
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
	first[ntypes] = n;
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, run, &conns[i]))
			die("pthread_create");
	double t0 = now();
	t_warm = t0 + secs * 0.1;
	t_end = t0 + secs;
	atomic_store(&go, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double span = secs * 0.9;
	printf("{\"seconds\":%.3f,\"tenants\":[", span);
	for (int t = 0; t < ntypes; t++) {
		uint64_t bytes = 0, msgs = 0;
		size_t nlat = 0;
		for (int i = first[t]; i < first[t + 1]; i++) {
			bytes += conns[i].bytes, msgs += conns[i].msgs;
			if (conns[i].type == 'D') {
				memmove(conns[first[t]].lat + nlat, conns[i].lat, conns[i].nlat * sizeof(float));
				nlat += conns[i].nlat;
			}
		}
		printf("%s{\"type\":\"%c\",\"conns\":%d,\"bytes\":%llu,\"msgs\":%llu", t ? "," : "", conns[first[t]].type,
		       first[t + 1] - first[t], (unsigned long long)bytes, (unsigned long long)msgs);
		if (nlat > 0) {
			float *l = conns[first[t]].lat;
			qsort(l, nlat, sizeof *l, cmpf);
			printf(",\"p50_us\":%.2f,\"p99_us\":%.2f", l[nlat / 2], l[nlat * 99 / 100]);
		}
		printf("}");
	}
	printf("]}\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	if (argc >= 5 && strcmp(argv[1], "client") == 0)
		return client(atoi(argv[2]), atof(argv[3]), argc - 4, argv + 4);
	fprintf(stderr, "usage: tenants server PORT | tenants client PORT SECONDS TYPE[:COUNT]...\n");
	return 2;
}
