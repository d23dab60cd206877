/*
 * echo.c - a TCP echo pair written like any application, for the
 * interposer's tests. Built with -O2 -D_FORTIFY_SOURCE=2, so the fixed-size
 * reads below go through __read_chk, __recv_chk and __recvfrom_chk.
 *
 *   echo server LOOP NCONN [v6]
 *       listens on loopback, prints "port N", serves NCONN connections and
 *       exits 0. LOOP: iter (blocking, one at a time), fork (a child per
 *       connection on the inherited socket), poll, ppoll, select, pselect,
 *       epoll, epoll_pwait, epoll_pwait2 (nonblocking event loops).
 *   echo client PORT SIZE SEED IO [v6]
 *       sends SIZE pseudo-random bytes from a thread, reads the echo in the
 *       main thread and prints "ok N HASH" when both directions match. IO:
 *       rw (write/read), send (send/recv), sendto (sendto/recvfrom), vec
 *       (writev/readv), msg (sendmsg/recvmsg), mmsg (sendmmsg/recvmmsg),
 *       waitall (send/recv MSG_WAITALL).
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define die(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "echo: " __VA_ARGS__);                                             \
		fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                       \
		exit(2);                                                                           \
	} while (0)

static int v6;
/* Read size, known only at run time so that _FORTIFY_SOURCE routes the reads
 * through __read_chk, __recv_chk and __recvfrom_chk. */
static size_t rdcap = 5000;

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static unsigned char byte_at(uint64_t seed, uint64_t i)
{
	uint64_t x = (i / 8 + 1) * 0x9E3779B97F4A7C15ULL ^ seed;
	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 29;
	return (unsigned char)(x >> (8 * (i % 8)));
}

/* ---- server ---------------------------------------------------------------------- */

struct conn {
	int fd;
	char buf[65536];
	size_t len, off;
	int eof;
};

static void echo_blocking(int fd)
{
	char buf[32768];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("server read");
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w < 0)
				die("server write");
			off += w;
		}
	}
	close(fd);
}

/* Moves bytes for one ready connection; 1 when it is finished. */
static int conn_step(struct conn *c)
{
	for (;;) {
		if (c->off < c->len) {
			ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
			if (w < 0 && errno == EAGAIN)
				return 0;
			if (w < 0)
				die("server send");
			c->off += (size_t)w;
			continue;
		}
		if (c->eof)
			return 1;
		ssize_t n = recv(c->fd, c->buf, sizeof c->buf, 0);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			die("server recv");
		if (n == 0) {
			c->eof = 1;
			return 1;
		}
		c->len = (size_t)n;
		c->off = 0;
	}
}

static short conn_events(const struct conn *c) { return c->off < c->len ? POLLOUT : POLLIN; }

static void serve_events(int lfd, int nconn, const char *loop)
{
	struct conn *conns = calloc((size_t)nconn, sizeof *conns);
	int open = 0, accepted = 0, done = 0;
	fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
	int ep = -1;
	int is_epoll = strncmp(loop, "epoll", 5) == 0;
	if (is_epoll) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)-1};
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
			die("epoll setup");
	}
	while (done < nconn) {
		int lready = 0;
		int ready[1024], nready = 0;
		if (is_epoll) {
			struct epoll_event evs[64];
			int n;
			struct timespec ts = {5, 0};
			if (strcmp(loop, "epoll_pwait") == 0)
				n = epoll_pwait(ep, evs, 64, 5000, NULL);
			else if (strcmp(loop, "epoll_pwait2") == 0)
				n = epoll_pwait2(ep, evs, 64, &ts, NULL);
			else
				n = epoll_wait(ep, evs, 64, 5000);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("epoll_wait %d", n);
			for (int i = 0; i < n; i++) {
				if (evs[i].data.u32 == (uint32_t)-1)
					lready = 1;
				else
					ready[nready++] = (int)evs[i].data.u32;
			}
		} else if (strcmp(loop, "select") == 0 || strcmp(loop, "pselect") == 0) {
			fd_set r, w;
			FD_ZERO(&r);
			FD_ZERO(&w);
			FD_SET(lfd, &r);
			int maxfd = lfd;
			for (int i = 0; i < accepted; i++) {
				if (conns[i].fd < 0)
					continue;
				FD_SET(conns[i].fd, conn_events(&conns[i]) == POLLIN ? &r : &w);
				if (conns[i].fd > maxfd)
					maxfd = conns[i].fd;
			}
			int n;
			if (loop[0] == 'p') {
				struct timespec ts = {5, 0};
				n = pselect(maxfd + 1, &r, &w, NULL, &ts, NULL);
			} else {
				struct timeval tv = {5, 0};
				n = select(maxfd + 1, &r, &w, NULL, &tv);
			}
			if (n <= 0)
				die("select %d", n);
			lready = FD_ISSET(lfd, &r);
			for (int i = 0; i < accepted; i++)
				if (conns[i].fd >= 0 && (FD_ISSET(conns[i].fd, &r) || FD_ISSET(conns[i].fd, &w)))
					ready[nready++] = i;
		} else {
			struct pollfd p[1025];
			int idx[1025], np = 0;
			p[np] = (struct pollfd){.fd = lfd, .events = POLLIN};
			idx[np++] = -1;
			for (int i = 0; i < accepted; i++)
				if (conns[i].fd >= 0) {
					p[np] = (struct pollfd){.fd = conns[i].fd, .events = conn_events(&conns[i])};
					idx[np++] = i;
				}
			int n;
			if (strcmp(loop, "ppoll") == 0) {
				struct timespec ts = {5, 0};
				n = ppoll(p, (nfds_t)np, &ts, NULL);
			} else {
				n = poll(p, (nfds_t)np, 5000);
			}
			if (n <= 0)
				die("poll %d", n);
			for (int i = 0; i < np; i++) {
				if (!p[i].revents)
					continue;
				if (idx[i] < 0)
					lready = 1;
				else
					ready[nready++] = idx[i];
			}
		}
		for (int i = 0; i < nready; i++) {
			struct conn *c = &conns[ready[i]];
			if (c->fd < 0)
				continue;
			short before = conn_events(c);
			if (conn_step(c)) {
				if (is_epoll)
					epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				c->fd = -1;
				open--;
				done++;
			} else if (is_epoll && conn_events(c) != before) {
				struct epoll_event ev = {.events = (uint32_t)conn_events(c), .data.u32 = (uint32_t)ready[i]};
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			}
		}
		while (lready && accepted < nconn) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0 && errno == EAGAIN)
				break;
			if (fd < 0)
				die("accept4");
			conns[accepted].fd = fd;
			if (is_epoll) {
				struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)accepted};
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
					die("epoll_ctl add");
			}
			accepted++;
			open++;
		}
	}
	if (ep >= 0)
		close(ep);
	free(conns);
}

static int server(const char *loop, int nconn)
{
	int lfd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t sl;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		sl = sizeof *a;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof *a;
	}
	if (bind(lfd, (struct sockaddr *)&ss, sl) < 0 || listen(lfd, 128) < 0)
		die("bind/listen");
	sl = sizeof ss;
	getsockname(lfd, (struct sockaddr *)&ss, &sl);
	int port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
	printf("port %d\n", port);
	fflush(stdout);
	if (strcmp(loop, "iter") == 0 || strcmp(loop, "fork") == 0) {
		for (int i = 0; i < nconn; i++) {
			struct sockaddr_storage peer;
			socklen_t pl = sizeof peer;
			int fd = accept(lfd, (struct sockaddr *)&peer, &pl);
			if (fd < 0)
				die("accept");
			if (strcmp(loop, "iter") == 0) {
				echo_blocking(fd);
				continue;
			}
			pid_t pid = fork();
			if (pid < 0)
				die("fork");
			if (pid == 0) {
				close(lfd);
				echo_blocking(fd);
				_exit(0);
			}
			close(fd);
		}
		int status, bad = 0;
		while (wait(&status) > 0)
			bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
		close(lfd);
		return bad;
	}
	serve_events(lfd, nconn, loop);
	close(lfd);
	return 0;
}

/* ---- client ------------------------------------------------------------------------ */

struct sender {
	int fd;
	uint64_t size, seed, hash;
	const char *io;
};

static void *send_all(void *arg)
{
	struct sender *s = arg;
	unsigned char buf[3 * 4096 + 17];
	uint64_t h = 14695981039346656037ULL;
	for (uint64_t off = 0; off < s->size;) {
		size_t n = sizeof buf;
		if (n > s->size - off)
			n = (size_t)(s->size - off);
		for (size_t i = 0; i < n; i++)
			buf[i] = byte_at(s->seed, off + i);
		h = fnv(h, buf, n);
		for (size_t done = 0; done < n;) {
			ssize_t w;
			const char *io = s->io;
			size_t left = n - done;
			unsigned char *p = buf + done;
			if (strcmp(io, "rw") == 0) {
				w = write(s->fd, p, left);
			} else if (strcmp(io, "sendto") == 0) {
				w = sendto(s->fd, p, left, 0, NULL, 0);
			} else if (strcmp(io, "vec") == 0 || strcmp(io, "msg") == 0 || strcmp(io, "mmsg") == 0) {
				size_t half = left / 2;
				struct iovec iov[2] = {{p, half}, {p + half, left - half}};
				if (io[0] == 'v') {
					w = writev(s->fd, iov, 2);
				} else {
					struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
					if (io[1] == 's') {
						w = sendmsg(s->fd, &m, 0);
					} else {
						struct mmsghdr mm = {.msg_hdr = m};
						w = sendmmsg(s->fd, &mm, 1, 0) == 1 ? (ssize_t)mm.msg_len : -1;
					}
				}
			} else {
				w = send(s->fd, p, left, 0);
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				die("client send");
			done += (size_t)w;
		}
		off += n;
	}
	s->hash = h;
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

static int client(int port, uint64_t size, uint64_t seed, const char *io)
{
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	socklen_t sl;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons((uint16_t)port);
		sl = sizeof *a;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = htons((uint16_t)port);
		sl = sizeof *a;
	}
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0)
		die("connect");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct sender s = {.fd = fd, .size = size, .seed = seed, .io = io};
	pthread_t t;
	pthread_create(&t, NULL, send_all, &s);
	uint64_t got = 0, h = 14695981039346656037ULL;
	int mismatch = 0;
	for (;;) {
		unsigned char buf[5000];
		ssize_t n;
		if (strcmp(io, "rw") == 0) {
			n = read(fd, buf, rdcap);
		} else if (strcmp(io, "sendto") == 0) {
			struct sockaddr_storage from;
			socklen_t fl = sizeof from;
			n = recvfrom(fd, buf, rdcap, 0, (struct sockaddr *)&from, &fl);
			if (n >= 0 && fl != 0)
				die("recvfrom address length %u, want 0", fl);
		} else if (strcmp(io, "vec") == 0 || strcmp(io, "msg") == 0 || strcmp(io, "mmsg") == 0) {
			struct iovec iov[2] = {{buf, 100}, {buf + 100, sizeof buf - 100}};
			struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
			if (io[0] == 'v') {
				n = readv(fd, iov, 2);
			} else if (io[1] == 's') {
				n = recvmsg(fd, &m, 0);
			} else {
				struct mmsghdr mm = {.msg_hdr = m};
				int k = recvmmsg(fd, &mm, 1, 0, NULL);
				n = k == 1 ? (ssize_t)mm.msg_len : k;
			}
		} else if (strcmp(io, "waitall") == 0) {
			size_t want = size - got < sizeof buf ? (size_t)(size - got) : sizeof buf;
			n = recv(fd, buf, want ? want : 1, MSG_WAITALL);
			if (n >= 0 && (size_t)n != want && n != 0)
				die("MSG_WAITALL returned %zd of %zu", n, want);
		} else {
			n = recv(fd, buf, rdcap, 0);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("client recv");
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			mismatch |= buf[i] != byte_at(seed, got + (uint64_t)i);
		h = fnv(h, buf, (size_t)n);
		got += (uint64_t)n;
	}
	pthread_join(t, NULL);
	close(fd);
	if (got != size || h != s.hash || mismatch) {
		fprintf(stderr, "echo: got %llu of %llu bytes, hash %llx want %llx, mismatch %d\n",
			(unsigned long long)got, (unsigned long long)size, (unsigned long long)h,
			(unsigned long long)s.hash, mismatch);
		return 1;
	}
	printf("ok %llu %016llx\n", (unsigned long long)got, (unsigned long long)h);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (getenv("ECHO_RDCAP") != NULL)
		rdcap = strtoul(getenv("ECHO_RDCAP"), NULL, 0);
	if (rdcap == 0 || rdcap > 5000)
		rdcap = 5000;
	if (argc >= 4 && strcmp(argv[1], "server") == 0) {
		v6 = argc > 4 && strcmp(argv[4], "v6") == 0;
		return server(argv[2], atoi(argv[3]));
	}
	if (argc >= 6 && strcmp(argv[1], "client") == 0) {
		v6 = argc > 6 && strcmp(argv[6], "v6") == 0;
		return client(atoi(argv[2]), strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0), argv[5]);
	}
	fprintf(stderr, "usage: echo server LOOP NCONN [v6] | echo client PORT SIZE SEED IO [v6]\n");
	return 2;
}
