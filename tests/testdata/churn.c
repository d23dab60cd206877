/* Connection lifetime: a long-running echo server and short-lived clients.
 *
 *   churn server [prefork]
 *                         an epoll echo server on 127.0.0.1:0 that prints
 *                         {"port":N} and runs until killed; a connection
 *                         that ends or fails is closed, the server goes on;
 *                         prefork: a fork child accepts on the same
 *                         listener too (a pre-fork server), and dies with
 *                         its parent
 *   churn client PORT N SIZE END
 *                         N connections one after another: each sends
 *                         SIZE bytes, reads the echo back and checks it;
 *                         then END: "exit" (closes every connection and
 *                         exits), "kill" (opens one more connection, sends
 *                         SIZE bytes, reads none of the echo and kills
 *                         itself), "exec" (the last connection stays open
 *                         across an exec of /bin/true, whose exit closes it)
 *   churn hold PORT N ROUNDS SIZE [burst]
 *                         N connections held open at once, then ROUNDS
 *                         rounds of one echo of SIZE bytes on each (in
 *                         4 KiB steps; burst: sent in one call, then read
 *                         back); prints {"held":N} and keeps them until
 *                         its stdin ends
 *
 * The client prints {"ok":N} after its N echoes. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "churn: %s: %s\n", what, strerror(errno));
	exit(2);
}

static _Noreturn void serve(int prefork)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		die("listen");
	printf("{\"port\":%d}\n", ntohs(a.sin_port));
	fflush(stdout);
	pid_t parent = getpid();
	if (prefork) {
		pid_t child = fork();
		if (child < 0)
			die("fork");
		if (child == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent))
			exit(0);
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev))
		die("epoll");
	static char buf[65536];
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == l) {
				int c;
				while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce))
						die("epoll_ctl");
				}
				if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR)
					die("accept");
				continue;
			}
			/* Echo what is there; a peer that does not read blocks
			 * nothing: the rest of its echo is dropped with it. */
			for (;;) {
				ssize_t r = read(fd, buf, sizeof buf);
				if (r > 0) {
					for (ssize_t off = 0; off < r;) {
						ssize_t w = send(fd, buf + off, r - off, MSG_NOSIGNAL);
						if (w > 0) {
							off += w;
							continue;
						}
						if (w < 0 && errno == EINTR)
							continue;
						if (w < 0 && errno == EAGAIN) {
							/* The client reads its echo in steps. */
							struct pollfd pf = {.fd = fd, .events = POLLOUT};
							if (poll(&pf, 1, 5000) == 1)
								continue;
							errno = ETIMEDOUT;
						}
						r = -1;
						break;
					}
					if (r > 0)
						continue;
				}
				if (r < 0 && errno == EAGAIN)
					break;
				if (r < 0 && errno == EINTR)
					continue;
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
				break;
			}
		}
	}
}

static int dial(int port)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(port)};
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))
		die("connect");
	return c;
}

static void send_all(int c, const unsigned char *b, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = send(c, b + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("send");
		off += w;
	}
}

/* echo sends size bytes in steps of step bytes (4 KiB, so that neither
 * side's buffers need to hold the whole; or the whole in one call, so
 * that both directions' buffers hold it), reads the echo of each step
 * back and checks every byte. */
static void echo(int c, size_t size, size_t step, unsigned seed)
{
	step = step < 1 ? 1 : step;
	unsigned char *out = calloc(step, 1), *in = calloc(step, 1);
	if (!out || !in)
		die("calloc");
	for (size_t done = 0; done < size;) {
		size_t k = size - done < step ? size - done : step;
		for (size_t i = 0; i < k; i++)
			out[i] = (unsigned char)((done + i) * 31 + seed);
		send_all(c, out, k);
		for (size_t got = 0; got < k;) {
			ssize_t r = read(c, in + got, k - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				die("read echo");
			got += r;
		}
		if (memcmp(in, out, k)) {
			fprintf(stderr, "churn: echo differs\n");
			exit(2);
		}
		done += k;
	}
	free(out);
	free(in);
}

static _Noreturn void hold(int port, int n, int rounds, size_t size, int burst)
{
	int *c = calloc(n > 0 ? n : 1, sizeof *c);
	if (!c)
		die("calloc");
	for (int i = 0; i < n; i++)
		c[i] = dial(port);
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n; i++)
			echo(c[i], size, burst ? size : 4096, (unsigned)(r * n + i));
	printf("{\"held\":%d}\n", n);
	fflush(stdout);
	char b[64];
	while (read(0, b, sizeof b) > 0)
		;
	exit(0);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if ((argc == 2 || argc == 3) && !strcmp(argv[1], "server"))
		serve(argc == 3 && !strcmp(argv[2], "prefork"));
	if ((argc == 6 || (argc == 7 && !strcmp(argv[6], "burst"))) && !strcmp(argv[1], "hold"))
		hold(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), strtoul(argv[5], NULL, 10), argc == 7);
	if (argc != 6 || strcmp(argv[1], "client")) {
		fprintf(stderr, "usage: churn server [prefork] | churn client PORT N SIZE exit|kill|exec | churn hold PORT N ROUNDS SIZE [burst]\n");
		return 2;
	}
	int port = atoi(argv[2]), n = atoi(argv[3]);
	size_t size = strtoul(argv[4], NULL, 10);
	const char *end = argv[5];
	int last = -1;
	for (int i = 0; i < n; i++) {
		int c = dial(port);
		echo(c, size, 4096, (unsigned)(getpid() + i));
		if (i == n - 1 && !strcmp(end, "exec"))
			last = c;
		else
			close(c);
	}
	printf("{\"ok\":%d}\n", n);
	fflush(stdout);
	if (!strcmp(end, "kill")) {
		static unsigned char b[4096];
		int c = dial(port);
		send_all(c, b, sizeof b);
		raise(SIGKILL);
	}
	if (!strcmp(end, "exec")) {
		(void)last; /* not close-on-exec: /bin/true inherits it */
		execl("/bin/true", "true", (char *)NULL);
		die("exec");
	}
	return 0;
}
