/*
 * fork_echo.c - echo servers that fork, exec and spawn around their
 * connections, and a checking client (tests/preload_fork_test.go).
 *
 *   fork_echo server MODE N [DELAY_MS]
 *       Listens on 127.0.0.1 (port printed as "port P"), serves N
 *       connections, each echoed until EOF, and exits when all are done.
 *       DELAY_MS: pause after accept before forking (bytes pile up).
 *       MODE:
 *         perconn  accept, fork; the child echoes, the parent closes its
 *                  copy right away
 *         waitconn the same, but the parent closes its copy only once
 *                  the child exited
 *         exitconn the same, but the parent exits (exit()) right after
 *                  the fork, leaving the connection to the child, which
 *                  first uses it 200 ms later
 *         killconn the same, but the parent is killed (SIGKILL) right
 *                  after the fork
 *         killepoll the same, but the child's first call is epoll_ctl
 *         exitmid  the same as perconn, but the parent exits 100 ms
 *                  after the fork, while the child echoes
 *         epollconn the same, but the child's first call on the socket
 *                  is epoll_ctl (then epoll_wait for the request), as a
 *                  postgres backend's is
 *         pollconn, selectconn  the same with poll or select as the
 *                  child's first call (an inetd-style handler's)
 *         forkconn the same as perconn, but the child first forks a
 *                  grandchild that exits at once
 *         optconn  the same, but the child first sets TCP_NODELAY,
 *                  SO_KEEPALIVE and SO_RCVTIMEO and reads SO_ERROR and
 *                  SO_TYPE (a handler's setup)
 *         readfork accept, read a 64-byte request, fork; the child sends
 *                  the request back, then echoes the rest
 *         greetfork the same, but the parent sends the request back
 *                  before it forks (unread by a lazy client then)
 *         prefork  fork 2 workers that accept on the inherited listener
 *         exec     accept, fork; the child execs "fork_echo fd FD"
 *         vfork    accept, vfork + exec "fork_echo fd FD"
 *         spawn    accept, posix_spawn "fork_echo fd FD"
 *         bgsave   accept; echo in the parent, which forks after the
 *                  first read a child that closes its copy and exits
 *                  without using it, one that exits at once, as
 *                  redis-server's BGSAVE child does, and one that execs
 *                  true
 *       A mode ending in "+cloexec" accepts with SOCK_CLOEXEC (what the
 *       shim keeps accelerated across a fork until the child uses it).
 *   fork_echo fd FD
 *       Echoes on the inherited socket FD until EOF.
 *   fork_echo client PORT BYTES SEED [READ_DELAY_MS]
 *       Connects, writes BYTES pseudo-random bytes (one thread) while
 *       reading the echo (another, which may start late), half-closes,
 *       checks every byte and the EOF, prints "ok BYTES".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void die(const char *what)
{
	fprintf(stderr, "fork_echo[%d]: %s: %s\n", getpid(), what, strerror(errno));
	exit(1);
}

/* Registers fd in a new epoll set and waits (up to 10 s) until it is
 * readable: a first use of the socket that is not a data call. */
static void wait_readable_epoll(int fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		die("epoll_ctl");
	if (epoll_wait(ep, &ev, 1, 10000) != 1)
		die("epoll_wait: request not seen");
	close(ep);
}

static void handler_setup(int fd)
{
	int one = 1, v = -1;
	struct timeval tv = {5, 0};
	socklen_t l = sizeof v;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
		die("setsockopt");
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l) != 0 || v != 0)
		die("SO_ERROR");
	l = sizeof v;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) != 0 || v != SOCK_STREAM)
		die("SO_TYPE");
}

static void wait_readable_poll(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 10000) != 1)
		die("poll: request not seen");
}

static void wait_readable_select(int fd)
{
	fd_set r;
	FD_ZERO(&r);
	FD_SET(fd, &r);
	struct timeval tv = {10, 0};
	if (select(fd + 1, &r, NULL, NULL, &tv) != 1)
		die("select: request not seen");
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Echo on fd until EOF, calling first(fd) (when not NULL) after the first
 * read; 0 or -1. */
static int echo_then(int fd, int (*first)(int))
{
	char buf[65536];
	for (int reads = 0;; reads++) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		if (reads == 0 && first != NULL && first(fd) < 0)
			return -1;
		if (write_all(fd, buf, (size_t)r) < 0)
			return -1;
	}
	shutdown(fd, SHUT_WR);
	return 0;
}

static int echo(int fd) { return echo_then(fd, NULL); }

static char *self;

static void exec_echo(int fd)
{
	char num[16];
	snprintf(num, sizeof num, "%d", fd);
	execl(self, self, "fd", num, (char *)NULL);
	_exit(127);
}

static int listener(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 64) < 0)
		die("listen");
	socklen_t al = sizeof a;
	getsockname(l, (struct sockaddr *)&a, &al);
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	return l;
}

static int reap(int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		int st;
		if (wait(&st) < 0)
			die("wait");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	return bad;
}

/* bgsave: forks three children that never use fd (one closes its copy
 * first, one execs true), and waits for them. */
static int bgsave(int fd)
{
	pid_t a = fork();
	if (a == 0) {
		close(fd);
		sleep_ms(20);
		_exit(0);
	}
	pid_t b = fork();
	if (b == 0)
		_exit(0);
	pid_t c = fork();
	if (c == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	if (a < 0 || b < 0 || c < 0 || waitpid(a, NULL, 0) < 0 || waitpid(b, NULL, 0) < 0 || waitpid(c, &st, 0) < 0 ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

static int server(const char *arg, int n, int delay)
{
	char mode[32];
	snprintf(mode, sizeof mode, "%s", arg);
	int flags = 0;
	char *plus = strchr(mode, '+');
	if (plus != NULL) {
		if (strcmp(plus, "+cloexec") != 0) {
			errno = EINVAL;
			die(arg);
		}
		*plus = 0;
		flags = SOCK_CLOEXEC;
	}
	int l = listener();
	if (strcmp(mode, "prefork") == 0) {
		/* Worker w serves connections until n in all were served: each
		 * worker takes about half; they count through a pipe. */
		int counter[2];
		if (pipe(counter) < 0)
			die("pipe");
		pid_t workers[2];
		for (int w = 0; w < 2; w++) {
			pid_t pid = fork();
			if (pid < 0)
				die("fork");
			workers[w] = pid;
			if (pid == 0) {
				signal(SIGTERM, SIG_DFL);
				close(counter[0]);
				for (;;) {
					int c = accept(l, NULL, NULL);
					if (c < 0) {
						if (errno == EINTR)
							continue;
						die("accept");
					}
					if (echo(c) < 0)
						die("echo");
					close(c);
					if (write(counter[1], "x", 1) != 1)
						die("count");
				}
			}
		}
		close(counter[1]);
		close(l);
		for (int done = 0; done < n;) {
			char x;
			ssize_t r = read(counter[0], &x, 1);
			if (r == 1)
				done++;
			else if (r < 0 && errno == EINTR)
				continue;
			else
				die("counter");
		}
		for (int w = 0; w < 2; w++)
			kill(workers[w], SIGTERM);
		for (int w = 0; w < 2; w++)
			waitpid(workers[w], NULL, 0);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		int c = accept4(l, NULL, NULL, flags);
		if (c < 0)
			die("accept");
		if (delay > 0)
			sleep_ms(delay);
		if (strcmp(mode, "bgsave") == 0) {
			if (echo_then(c, bgsave) < 0)
				die("echo");
			close(c);
			continue;
		}
		char req[64];
		int have = 0;
		if (strcmp(mode, "readfork") == 0 || strcmp(mode, "greetfork") == 0) {
			while (have < (int)sizeof req) {
				ssize_t r = read(c, req + have, sizeof req - (size_t)have);
				if (r <= 0)
					die("read request");
				have += (int)r;
			}
			if (strcmp(mode, "greetfork") == 0) {
				if (write_all(c, req, (size_t)have) < 0)
					die("greet");
				have = 0;
			}
		}
		pid_t pid;
		if (strcmp(mode, "vfork") == 0) {
			pid = vfork();
			if (pid == 0)
				exec_echo(c);
		} else if (strcmp(mode, "spawn") == 0) {
			char num[16];
			snprintf(num, sizeof num, "%d", c);
			char *argv[] = {self, "fd", num, NULL};
			int e = posix_spawn(&pid, self, NULL, NULL, argv, environ);
			if (e != 0) {
				errno = e;
				die("posix_spawn");
			}
		} else {
			pid = fork();
			if (pid == 0) {
				close(l);
				if (strcmp(mode, "exec") == 0)
					exec_echo(c);
				if (strcmp(mode, "exitconn") == 0)
					sleep_ms(200); /* first use once the parent is gone */
				if (strcmp(mode, "epollconn") == 0 || strcmp(mode, "killepoll") == 0) {
					if (strcmp(mode, "killepoll") == 0)
						sleep_ms(100); /* first use once the parent is gone */
					wait_readable_epoll(c);
				}
				if (strcmp(mode, "pollconn") == 0)
					wait_readable_poll(c);
				if (strcmp(mode, "optconn") == 0)
					handler_setup(c);
				if (strcmp(mode, "forkconn") == 0) {
					pid_t g = fork();
					if (g == 0)
						_exit(0);
					if (g < 0 || waitpid(g, NULL, 0) != g)
						die("grandchild");
				}
				if (strcmp(mode, "selectconn") == 0)
					wait_readable_select(c);
				if (have > 0 && write_all(c, req, (size_t)have) < 0)
					_exit(2);
				_exit(echo(c) < 0 ? 3 : 0);
			}
		}
		if (pid < 0)
			die("fork");
		if (strcmp(mode, "exitconn") == 0)
			exit(0);
		if (strcmp(mode, "killconn") == 0 || strcmp(mode, "killepoll") == 0)
			raise(SIGKILL);
		if (strcmp(mode, "exitmid") == 0) {
			sleep_ms(100);
			exit(0);
		}
		if (strcmp(mode, "waitconn") == 0) {
			int st;
			if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				die("waitconn child");
			close(c);
			continue;
		}
		close(c); /* the parent's copy, right away */
	}
	return strcmp(mode, "bgsave") == 0 || strcmp(mode, "waitconn") == 0 ? 0 : reap(n) ? 1 : 0;
}

/* ---- client ------------------------------------------------------------- */

struct gen {
	uint64_t s;
};

static uint8_t gen_byte(struct gen *g)
{
	g->s ^= g->s << 13;
	g->s ^= g->s >> 7;
	g->s ^= g->s << 17;
	return (uint8_t)(g->s >> 24);
}

struct writer {
	int fd;
	long total;
	uint64_t seed;
	int err;
};

static void *write_side(void *arg)
{
	struct writer *w = arg;
	struct gen g = {w->seed};
	char buf[40000]; /* not a power of two: blocks and segments cut anywhere */
	for (long sent = 0; sent < w->total;) {
		size_t n = sizeof buf;
		if ((long)n > w->total - sent)
			n = (size_t)(w->total - sent);
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)gen_byte(&g);
		if (write_all(w->fd, buf, n) < 0) {
			w->err = errno;
			return NULL;
		}
		sent += (long)n;
	}
	if (shutdown(w->fd, SHUT_WR) < 0)
		w->err = errno;
	return NULL;
}

static int client(int port, long total, uint64_t seed, int read_delay)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect");
	struct writer w = {fd, total, seed | 1, 0};
	pthread_t t;
	pthread_create(&t, NULL, write_side, &w);
	struct gen g = {seed | 1};
	char buf[65536];
	long got = 0;
	if (read_delay > 0)
		sleep_ms(read_delay);
	for (;;) {
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if ((uint8_t)buf[i] != gen_byte(&g)) {
				fprintf(stderr, "fork_echo: byte %ld differs\n", got + i);
				return 1;
			}
		}
		got += r;
	}
	pthread_join(t, NULL);
	if (w.err != 0) {
		errno = w.err;
		die("write");
	}
	if (got != total) {
		fprintf(stderr, "fork_echo: EOF after %ld bytes of %ld\n", got, total);
		return 1;
	}
	close(fd);
	printf("ok %ld\n", total);
	return 0;
}

int main(int argc, char **argv)
{
	self = argv[0];
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && strcmp(argv[1], "server") == 0) {
		signal(SIGCHLD, SIG_DFL);
		return server(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
	}
	if (argc == 3 && strcmp(argv[1], "fd") == 0)
		return echo(atoi(argv[2])) < 0 ? 1 : 0;
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "client") == 0)
		return client(atoi(argv[2]), atol(argv[3]), strtoull(argv[4], NULL, 10), argc > 5 ? atoi(argv[5]) : 0);
	fprintf(stderr, "usage: fork_echo server MODE N [DELAY_MS] | fd FD | client PORT BYTES SEED [READ_DELAY_MS]\n");
	return 2;
}
