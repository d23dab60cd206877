/* costpair - the programs the cost table measures, written as ordinary
 * sockets programs (no knowledge of sdpshim).
 *
 *   costpair server PORT pp|stream|epoll|forkepoll|conn
 *       pp      accepts one connection, echoes 64-byte messages until EOF
 *       stream  accepts one connection, reads until EOF
 *       epoll   an epoll loop: accepts connections and echoes each 64-byte
 *               message, until every connection it accepted has closed
 *       forkepoll  the epoll loop run by a fork child of the listening
 *               process (a pre-fork server), which waits for it
 *       conn    accepts connections one after another: reads 64 bytes,
 *               echoes them, reads to EOF, closes; a connection whose
 *               64 bytes begin with 'q' is the last
 *   costpair client PORT pp|stream|epoll|forkepoll|conn N [CONNS [IDLE]]
 *       pp      N ping-pong round trips of 64 bytes
 *       stream  N writes of 64 KiB
 *       epoll   CONNS connections, each with one 64-byte request in
 *               flight, N requests in all, beside IDLE connections
 *               opened first that carry nothing
 *       conn    N connections one after another (connect, a 64-byte
 *               round trip, close), then the last one
 *
 * The server's process is what the cost table counts (under perf stat);
 * the client prints {"msgs":N} when every reply was checked. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sockio.h"

#define MSG 64
#define BULK (64 << 10)


static int serve_epoll(int l)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev))
		die("epoll");
	int open = 0, accepted = 0;
	char b[MSG * 16];
	struct epoll_event evs[64];
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == l) {
				int c = accept(l, NULL, NULL);
				if (c < 0)
					die("accept");
				nodelay(c);
				struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
				open++;
				accepted++;
				continue;
			}
			ssize_t r = read(fd, b, sizeof b);
			if (r <= 0) {
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				if (--open == 0 && accepted > 0)
					return 0;
				continue;
			}
			if (full(fd, b, (size_t)r, 0))
				die("echo");
		}
	}
}

/* conn: one connection after another until the last ('q'). */
static int serve_conns(int l)
{
	char b[MSG];
	do
		if (echo_conn(l, b, MSG))
			die("echo");
	while (b[0] != 'q');
	return 0;
}

static int server(int port, const char *mode)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128))
		die("listen");
	if (strcmp(mode, "epoll") == 0)
		return serve_epoll(l);
	if (strcmp(mode, "forkepoll") == 0) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(serve_epoll(l));
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
			die("the serving child");
		return WEXITSTATUS(st);
	}
	if (strcmp(mode, "conn") == 0)
		return serve_conns(l);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		die("accept");
	nodelay(c);
	static char b[BULK];
	for (;;) {
		ssize_t r = read(c, b, strcmp(mode, "pp") == 0 ? MSG : BULK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		if (r == 0)
			return 0;
		if (strcmp(mode, "pp") == 0 && (full(c, b + r, MSG - (size_t)r, 1) || full(c, b, MSG, 0)))
			die("echo");
	}
}

static int dial(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(s, (struct sockaddr *)&a, sizeof a))
		die("connect");
	return nodelay(s);
}

static int client(int port, const char *mode, long n, int conns, int idle)
{
	static char b[BULK], got[BULK];
	for (int i = 0; i < BULK; i++)
		b[i] = (char)(i * 7 + 1);
	if (strcmp(mode, "conn") == 0) {
		for (long i = 0; i <= n; i++) {
			if (i == n)
				b[0] = 'q'; /* the last */
			int s = dial(port);
			if (full(s, b, MSG, 0) || full(s, got, MSG, 1) || memcmp(got, b, MSG) != 0)
				die("conn echo");
			close(s);
		}
	} else if (strcmp(mode, "stream") == 0) {
		int s = dial(port);
		for (long i = 0; i < n; i++)
			if (full(s, b, BULK, 0))
				die("write");
		shutdown(s, SHUT_WR);
		while (read(s, got, sizeof got) > 0)
			;
		close(s);
	} else {
		if (strcmp(mode, "pp") == 0)
			conns = 1; /* the others: one request in flight per connection */
		int *quiet = calloc((size_t)idle + 1, sizeof *quiet);
		for (int k = 0; k < idle; k++)
			quiet[k] = dial(port);
		int *fd = calloc((size_t)conns, sizeof *fd);
		for (int k = 0; k < conns; k++)
			fd[k] = dial(port);
		long sent = 0, done = 0;
		for (int k = 0; k < conns && sent < n; k++, sent++) /* one in flight each */
			if (full(fd[k], b, MSG, 0))
				die("write");
		struct pollfd *p = calloc((size_t)conns, sizeof *p);
		while (done < n) {
			for (int k = 0; k < conns; k++)
				p[k] = (struct pollfd){.fd = fd[k], .events = POLLIN};
			if (poll(p, (nfds_t)conns, 10000) <= 0)
				die("poll (a reply never came)");
			for (int k = 0; k < conns; k++) {
				if (!(p[k].revents & POLLIN))
					continue;
				if (full(fd[k], got, MSG, 1) || memcmp(got, b, MSG) != 0)
					die("reply");
				done++;
				if (sent < n) {
					if (full(fd[k], b, MSG, 0))
						die("write");
					sent++;
				}
			}
		}
		for (int k = 0; k < conns; k++)
			close(fd[k]);
		for (int k = 0; k < idle; k++)
			close(quiet[k]);
	}
	printf("{\"msgs\":%ld}\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	/* Room for a thousand idle connections and more (the hard limit);
	 * under a hard limit too low for them, the idle ones are fewer (the
	 * server holds as many, and its process a few of its own). */
	struct rlimit rl;
	long room = 1 << 20;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)room)
			room = (long)rl.rlim_cur;
	}
	if (argc >= 4 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]), argv[3]);
	if (argc >= 5 && strcmp(argv[1], "client") == 0) {
		int conns = argc > 5 ? atoi(argv[5]) : 1, idle = argc > 6 ? atoi(argv[6]) : 0;
		if (idle > room - conns - 128)
			idle = room - conns - 128 > 0 ? (int)(room - conns - 128) : 0;
		return client(atoi(argv[2]), argv[3], atol(argv[4]), conns, idle);
	}
	fprintf(stderr, "usage: costpair server PORT pp|stream|epoll|forkepoll|conn | client PORT MODE N [CONNS [IDLE]]\n");
	return 2;
}
