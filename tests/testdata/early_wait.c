/* Early writes, then a wait for writability: the race behind a select()
 * that slept through its socket being accelerated.
 *
 *   early_wait server N         accepts N connections, each after a short
 *                               random pause, and reads each to EOF
 *                               (it must see exactly TOTAL bytes)
 *   early_wait client PORT N MODE
 *                               N times: blocking connect, then nonblocking
 *                               writes of 8 KiB; on EAGAIN it waits for
 *                               writability with MODE (select, poll or
 *                               epoll) for at most 4 s
 *
 * The first writes fill the early buffer while the acceptor has not
 * claimed the connection; the verdict then arrives on a goroutine of the
 * shim (which accelerates the socket and flushes the early bytes) while
 * the program thread sleeps. A wait that outlives 4 s is a lost wakeup:
 * the client prints it and fails. Prints "port N" (server) and
 * "ok N stalls 0" (client). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#define TOTAL (256 * 1024)

static char buf[8192];

static int serve(int n)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128) ||
	    getsockname(l, (struct sockaddr *)&a, &al)) {
		perror("listen");
		return 1;
	}
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	srand(getpid());
	for (int i = 0; i < n; i++) {
		usleep(rand() % 300);
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			perror("accept");
			return 1;
		}
		long got = 0;
		ssize_t r;
		while ((r = read(c, buf, sizeof buf)) > 0)
			got += r;
		if (r < 0 || got != TOTAL) {
			fprintf(stderr, "connection %d: read %ld bytes (%s), want %d\n", i, got,
				r < 0 ? strerror(errno) : "EOF", TOTAL);
			return 1;
		}
		close(c);
	}
	return 0;
}

/* 1 when s became writable within 4 s. */
static int wait_writable(int s, const char *mode)
{
	if (!strcmp(mode, "select")) {
		fd_set w, e;
		FD_ZERO(&w);
		FD_ZERO(&e);
		FD_SET(s, &w);
		FD_SET(s, &e); /* as ncat asks */
		struct timeval tv = {4, 0};
		return select(s + 1, NULL, &w, &e, &tv) > 0;
	}
	if (!strcmp(mode, "poll")) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		return poll(&p, 1, 4000) > 0;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLOUT, .data.fd = s}, out;
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
	int r = epoll_wait(ep, &out, 1, 4000);
	close(ep);
	return r > 0;
}

static int client(int port, int n, const char *mode)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int stalls = 0;
	for (int i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) {
			perror("connect");
			return 1;
		}
		fcntl(s, F_SETFL, O_NONBLOCK);
		long sent = 0;
		while (sent < TOTAL) {
			size_t want = TOTAL - sent < (long)sizeof buf ? (size_t)(TOTAL - sent) : sizeof buf;
			ssize_t w = write(s, buf, want);
			if (w > 0) {
				sent += w;
				continue;
			}
			if (errno != EAGAIN) {
				perror("write");
				return 1;
			}
			if (!wait_writable(s, mode)) {
				fprintf(stderr, "connection %d: %s waited 4 s for writability at %ld bytes\n", i, mode, sent);
				stalls++;
			}
		}
		close(s);
	}
	printf("ok %d stalls %d\n", n, stalls);
	return stalls != 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(atoi(argv[2]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), atoi(argv[3]), argv[4]);
	fprintf(stderr, "usage: early_wait server N | early_wait client PORT N select|poll|epoll\n");
	return 2;
}
