/* A server at its fd limit (RLIMIT_NOFILE), and its clients. Both wait
 * with poll, or with MODE "epoll" with an epoll set made before their
 * first connection (as event loops do).
 *
 *   fdlimit server LIMIT [MODE]
 *       Sets its soft RLIMIT_NOFILE to LIMIT, listens on 127.0.0.1:0
 *       (backlog 4096) and prints {"port":N}. Then, for each line on
 *       stdin:
 *         "accept"   accepts until accept fails, prints
 *                    {"accepted":K,"errno":"E"} (K in all so far);
 *         "serve"    echoes one byte on every accepted connection until
 *                    each has echoed one, or 3 s passed; prints
 *                    {"echoed":K};
 *         "close N"  closes the first N accepted connections still open;
 *                    prints {"closed":N}.
 *       It exits at the end of its input.
 *   fdlimit client PORT N [MODE]
 *       Opens N connections (one every so often, as a client pool
 *       grows), prints {"connected":N}, then waits for a line on stdin;
 *       then sends one byte on each and counts the echoes that come
 *       within 3 s: {"echoes":K}; then exits at the end of its input.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "fdlimit: %s: %s\n", what, strerror(errno));
	exit(2);
}

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int ep = -1; /* MODE epoll: the process's set */

static int echo_epoll(int *fds, int n, int serve)
{
	char *done = calloc((size_t)n, 1);
	int left = 0, got = 0;
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0) {
			struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev))
				die("epoll_ctl");
			left++;
		}
	long long end = now_ms() + 3000;
	while (got < left && now_ms() < end) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, 100);
		if (k < 0 && errno != EINTR)
			die("epoll_wait");
		for (int j = 0; j < k; j++) {
			int i = (int)evs[j].data.u32;
			char b;
			if (!done[i] && read(fds[i], &b, 1) == 1 && (!serve || write(fds[i], &b, 1) == 1))
				got++;
			done[i] = 1;
			epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
		}
	}
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && !done[i])
			epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
	free(done);
	return got;
}

static int echo_round(int *fds, int n, int serve)
{
	if (ep >= 0)
		return echo_epoll(fds, n, serve);
	char *done = calloc((size_t)n, 1);
	struct pollfd *p = calloc((size_t)n, sizeof *p);
	int left = 0;
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			left++;
	int got = 0;
	long long end = now_ms() + 3000;
	while (got < left && now_ms() < end) {
		int k = 0;
		for (int i = 0; i < n; i++)
			p[i] = (struct pollfd){.fd = fds[i] >= 0 && !done[i] ? fds[i] : -1, .events = POLLIN};
		k = poll(p, (nfds_t)n, 100);
		if (k < 0 && errno != EINTR)
			die("poll");
		for (int i = 0; i < n && k > 0; i++)
			if (p[i].fd >= 0 && p[i].revents) {
				char b;
				if (read(fds[i], &b, 1) == 1 && (!serve || write(fds[i], &b, 1) == 1))
					got++;
				done[i] = 1;
			}
	}
	free(done);
	free(p);
	return got;
}

static void server(int limit, const char *mode)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)limit;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("setrlimit");
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		die("listen");
	if (!strcmp(mode, "epoll") && (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	printf("{\"port\":%d}\n", ntohs(a.sin_port));
	fflush(stdout);
	int *fds = calloc(65536, sizeof(int)), n = 0, first = 0;
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "accept", 6)) {
			int c, e = 0;
			struct pollfd p = {.fd = l, .events = POLLIN};
			/* Until the backlog is empty (a poll that waits a little)
			 * or accept fails. */
			while (poll(&p, 1, 200) == 1) {
				if ((c = accept(l, NULL, NULL)) < 0) {
					e = errno;
					break;
				}
				fds[n++] = c;
			}
			printf("{\"accepted\":%d,\"errno\":\"%s\"}\n", n - first, e == EMFILE ? "EMFILE" : e ? strerror(e) : "");
		} else if (!strncmp(line, "serve", 5)) {
			printf("{\"echoed\":%d}\n", echo_round(fds + first, n - first, 1));
		} else if (!strncmp(line, "close ", 6)) {
			int k = atoi(line + 6), c = 0;
			for (; c < k && first < n; c++)
				close(fds[first++]);
			printf("{\"closed\":%d}\n", c);
		}
		fflush(stdout);
	}
	exit(0);
}

static void client(int port, int n, const char *mode)
{
	if (!strcmp(mode, "epoll") && (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll_create1");
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)n + 64 ? rl.rlim_max : (rlim_t)n + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int *fds = calloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof a))
			die("connect");
	}
	printf("{\"connected\":%d}\n", n);
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		exit(0);
	for (int i = 0; i < n; i++)
		if (write(fds[i], "p", 1) != 1)
			die("write");
	printf("{\"echoes\":%d}\n", echo_round(fds, n, 0));
	fflush(stdout);
	while (fgets(line, sizeof line, stdin))
		;
	exit(0);
}

int main(int argc, char **argv)
{
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "server"))
		server(atoi(argv[2]), argc == 4 ? argv[3] : "poll");
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "client"))
		client(atoi(argv[2]), atoi(argv[3]), argc == 5 ? argv[4] : "poll");
	fprintf(stderr, "usage: fdlimit server LIMIT [MODE] | client PORT N [MODE]\n");
	return 2;
}
