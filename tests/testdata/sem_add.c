/*
 * sem_add - sockets added to an epoll set while a thread waits in it: a
 * server thread waits in one set (level- or edge-triggered), and the
 * main thread opens connections one by one, adds each accepted end to
 * the set (at once, or after a pause in which the server's thread goes to
 * sleep; and with the request written before or after the add) and waits
 * for the reply. Under the shim, an add to a set the interposer answers
 * for goes into the set's snapshot in place (shim/epoll_fast.go,
 * addInPlace), and the set grows past the room its snapshot had. Then
 * every third accepted end is closed and every third deleted while the
 * server waits, and added back. A reply
 * that does not come within 5 s prints a timeout line (a lost wakeup).
 *
 *   sem_add [N]      (default 200)
 */
#include "sem.h"

#include <pthread.h>

static int edge, stop_fd[2], ep;

static void *server(void *arg)
{
	(void)arg;
	struct epoll_event evs[8];
	for (;;) {
		int k = sem_events(ep, evs, 8);
		for (int i = 0; i < k; i++) {
			int fd = evs[i].data.fd;
			if (fd < 0)
				return NULL; /* the stop pipe */
			if (!(evs[i].events & EPOLLIN))
				continue;
			uint32_t v;
			ssize_t r;
			while ((r = read(fd, &v, sizeof v)) == (ssize_t)sizeof v) {
				v = ~v;
				CHECK(write(fd, &v, sizeof v) == (ssize_t)sizeof v, "server write");
				if (!edge)
					break;
			}
			CHECK(r == (ssize_t)sizeof v || (r < 0 && errno == EAGAIN), "server read %zd", r);
		}
	}
}

/* Asks connection i for a reply within ms; 1 when it came (and was right). */
static int ask(int fd, uint32_t v, int ms)
{
	uint32_t got = 0;
	CHECK(write(fd, &v, sizeof v) == (ssize_t)sizeof v, "client write");
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, ms) == 0)
		return 0;
	CHECK(read(fd, &got, sizeof got) == (ssize_t)sizeof got && got == ~v, "client read");
	return 1;
}

/* While the server's thread waits: every third accepted end closed, every
 * third deleted from the set; the rest still answer, the deleted ones
 * stay silent (a few asked), answer once added back, and the closed ones'
 * clients read EOF. */
static void removals(int et, int *cli, int *srv, int n)
{
	const char *mode = et ? "edge-triggered" : "level-triggered";
	for (int i = 0; i < n; i++) {
		if (i % 2 == 1)
			usleep(200); /* the server's thread goes to sleep */
		if (i % 3 == 0) {
			CHECK(close(srv[i]) == 0, "close");
			srv[i] = -1;
		} else if (i % 3 == 1) {
			CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, srv[i], NULL) == 0, "del");
		}
	}
	int kept = 0, silent = 0, back = 0, eof = 0;
	for (int i = 0; i < n; i++)
		if (i % 3 == 2 && ask(cli[i], (uint32_t)i + 7, 5000))
			kept++;
	for (int i = 1; i < n && i < 3 * 4; i += 3)
		if (!ask(cli[i], (uint32_t)i, 50))
			silent++;
	for (int i = 1; i < n; i += 3) {
		struct epoll_event ev = {.events = EPOLLIN | (et ? EPOLLET : 0), .data.fd = srv[i]};
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &ev) == 0, "add back");
		uint32_t got = 0;
		struct pollfd p = {.fd = cli[i], .events = POLLIN};
		if (i < 3 * 4) { /* the request asked while deleted is answered now */
			if (poll(&p, 1, 5000) == 1 && read(cli[i], &got, sizeof got) == (ssize_t)sizeof got && got == ~(uint32_t)i)
				back++;
		} else if (ask(cli[i], (uint32_t)i + 9, 5000)) {
			back++;
		}
	}
	for (int i = 0; i < n; i += 3) {
		char b;
		struct pollfd p = {.fd = cli[i], .events = POLLIN};
		if (poll(&p, 1, 5000) == 1 && read(cli[i], &b, 1) == 0)
			eof++;
	}
	say("%s: after closing %d and deleting %d: %d kept answered, %d deleted silent, %d answered once added back, %d closed at EOF",
	    mode, (n + 2) / 3, (n + 1) / 3, kept, silent, back, eof);
}

static void run(int et, int n)
{
	edge = et;
	ep = sem_stop_open(stop_fd, (epoll_data_t){.fd = -1});
	int *cli = calloc((size_t)n, sizeof *cli), *srv = calloc((size_t)n, sizeof *srv);
	pthread_t th;
	int answered = 0;
	for (int i = 0; i < n; i++) {
		pair(&cli[i], &srv[i]);
		set_nb(srv[i], 1);
		uint32_t v = (uint32_t)i * 2654435761u;
		int early = i % 3 == 2; /* the request before the add */
		if (early)
			CHECK(write(cli[i], &v, sizeof v) == (ssize_t)sizeof v, "client write");
		if (i % 2 == 1)
			usleep(300); /* the server's thread goes to sleep */
		struct epoll_event ev = {.events = EPOLLIN | (et ? EPOLLET : 0), .data.fd = srv[i]};
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &ev) == 0, "add");
		if (i == 0)
			CHECK(pthread_create(&th, NULL, server, NULL) == 0, "thread");
		if (!early)
			CHECK(write(cli[i], &v, sizeof v) == (ssize_t)sizeof v, "client write");
		struct pollfd p = {.fd = cli[i], .events = POLLIN};
		uint32_t got = 0;
		if (poll(&p, 1, 5000) == 0) {
			say("%s: connection %d: no reply within 5 s", et ? "edge-triggered" : "level-triggered", i);
			break;
		}
		CHECK(read(cli[i], &got, sizeof got) == (ssize_t)sizeof got && got == ~v, "client read");
		answered++;
	}
	/* Every connection once more, now that all are in the set. */
	for (int i = 0; i < answered; i++) {
		uint32_t v = (uint32_t)i, got = 0;
		CHECK(write(cli[i], &v, sizeof v) == (ssize_t)sizeof v, "client write");
		struct pollfd p = {.fd = cli[i], .events = POLLIN};
		if (poll(&p, 1, 5000) == 0) {
			say("%s: connection %d, second request: no reply within 5 s", et ? "edge-triggered" : "level-triggered", i);
			break;
		}
		CHECK(read(cli[i], &got, sizeof got) == (ssize_t)sizeof got && got == ~v, "client read");
	}
	say("%s: %d of %d connections added while the server waited answered", et ? "edge-triggered" : "level-triggered", answered, n);
	if (answered == n)
		removals(et, cli, srv, n);
	sem_stop(th, stop_fd, ep);
	for (int i = 0; i < n; i++) {
		close(cli[i]);
		if (srv[i] >= 0)
			close(srv[i]);
	}
	free(cli);
	free(srv);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	signal(SIGPIPE, SIG_IGN);
	run(0, n);
	run(1, n);
	sem_end();
	return 0;
}
