/*
 * sem_park - an epoll server over many connections, few of them busy at
 * any moment: each round the client (the main thread) picks one of N
 * connections at random, writes a request (the reply's size) and reads
 * the whole reply; the server (a thread) waits in one epoll set over the
 * N accepted ends, so each of its waits finds one ready entry among N and
 * the others idle for many waits. Level-triggered (the server switches
 * EPOLLOUT on while a reply is pending) and edge-triggered; replies of 64
 * bytes, and of 3 MiB (more than a connection buffers: the server's
 * nonblocking write meets EAGAIN and waits for room). A reply that does
 * not come within 5 s prints a timeout line (a lost wakeup).
 *
 *   sem_park [N]      (default 64)
 */
#include "sem.h"

#include <pthread.h>

#define BIG (3 << 20)

struct conn {
	int fd;
	uint32_t want, sent; /* the reply pending: its size, bytes written */
	int out;             /* EPOLLOUT is in its entry (level-triggered) */
};

static int n_conns, edge, stop_fd[2], ep;
static struct conn *srv;
static char *pat;

/* Writes what c's reply still needs; 1 when it is done, 0 on EAGAIN. */
static int push(struct conn *c)
{
	while (c->sent < c->want) {
		size_t k = c->want - c->sent;
		ssize_t r = write(c->fd, pat + c->sent, k);
		if (r < 0 && errno == EAGAIN)
			return 0;
		CHECK(r > 0, "server write");
		c->sent += (uint32_t)r;
	}
	return 1;
}

static void want_out(struct conn *c, int on)
{
	if (edge || c->out == on)
		return;
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
	CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) == 0, "mod");
	c->out = on;
}

static void *server(void *arg)
{
	(void)arg;
	struct epoll_event evs[8];
	for (;;) {
		int k = sem_events(ep, evs, 8);
		for (int i = 0; i < k; i++) {
			struct conn *c = evs[i].data.ptr;
			if (c == NULL)
				return NULL; /* the stop pipe */
			if (evs[i].events & EPOLLIN) {
				uint32_t size;
				ssize_t r;
				while ((r = read(c->fd, &size, sizeof size)) == (ssize_t)sizeof size) {
					c->sent = 0;
					c->want = size;
					if (!edge)
						break;
				}
				CHECK(r == (ssize_t)sizeof size || (r < 0 && errno == EAGAIN), "server read %zd", r);
			}
			if (c->sent < c->want)
				want_out(c, !push(c));
		}
	}
}

/* Reads exactly n bytes of fd into b, each wait bounded by 5 s; 0 when
 * none came in time. */
static int get(int fd, char *b, size_t n)
{
	while (n > 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 5000) == 0)
			return 0;
		ssize_t r = read(fd, b, n);
		CHECK(r > 0, "client read");
		b += r, n -= (size_t)r;
	}
	return 1;
}

static void rounds(const char *name, int *cli, int count, uint32_t size)
{
	static char buf[BIG];
	unsigned seed = 7;
	for (int r = 0; r < count; r++) {
		int i = (int)(rand_r(&seed) % (unsigned)n_conns);
		CHECK(write(cli[i], &size, sizeof size) == (ssize_t)sizeof size, "client write");
		if (!get(cli[i], buf, size)) {
			say("%s: round %d: no reply on connection %d within 5 s", name, r, i);
			return;
		}
		CHECK(memcmp(buf, pat, size) == 0, "reply bytes");
	}
	say("%s: %d rounds of %u bytes answered", name, count, size);
}

static void run(int et)
{
	edge = et;
	ep = sem_stop_open(stop_fd, (epoll_data_t){.ptr = NULL});
	int *cli = calloc((size_t)n_conns, sizeof *cli);
	srv = calloc((size_t)n_conns, sizeof *srv);
	for (int i = 0; i < n_conns; i++) {
		pair(&cli[i], &srv[i].fd);
		set_nb(srv[i].fd, 1);
		struct epoll_event ev = {.events = EPOLLIN | (et ? EPOLLOUT | EPOLLET : 0), .data.ptr = &srv[i]};
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, srv[i].fd, &ev) == 0, "add");
	}
	pthread_t th;
	CHECK(pthread_create(&th, NULL, server, NULL) == 0, "thread");
	const char *mode = et ? "edge-triggered" : "level-triggered";
	char name[64];
	snprintf(name, sizeof name, "%s, small", mode);
	rounds(name, cli, 3000, 64);
	snprintf(name, sizeof name, "%s, big", mode);
	rounds(name, cli, 30, BIG);
	sem_stop(th, stop_fd, ep);
	for (int i = 0; i < n_conns; i++) {
		close(cli[i]);
		close(srv[i].fd);
	}
	free(cli);
	free(srv);
}

int main(int argc, char **argv)
{
	n_conns = argc > 1 ? atoi(argv[1]) : 64;
	signal(SIGPIPE, SIG_IGN);
	pat = malloc(BIG);
	for (int i = 0; i < BIG; i++)
		pat[i] = (char)(i * 31 + 7);
	run(0);
	run(1);
	sem_end();
	return 0;
}
