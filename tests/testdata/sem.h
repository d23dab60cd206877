/*
 * sem.h - helpers of the sem_*.c programs: each checks socket and event
 * API semantics on TCP connections a process makes to itself and prints a
 * deterministic transcript (one line per observation) on stdout. The tests
 * run every program over kernel TCP and under the shim and compare the
 * transcripts; on stderr the program ends with "pairs N", the connections
 * it made (each must be accelerated under the shim).
 */
#ifndef SEM_H
#define SEM_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int sem_pairs;

#define CHECK(cond, ...)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                          \
			fprintf(stderr, __VA_ARGS__);                                            \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));              \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* epoll_wait(ep, evs, max, -1) past EINTR: the events (at least one). */
static inline int sem_events(int ep, struct epoll_event *evs, int max)
{
	for (;;) {
		int k = epoll_wait(ep, evs, max, -1);
		if (k < 0 && errno == EINTR)
			continue;
		CHECK(k > 0, "epoll_wait");
		return k;
	}
}

/* A server thread's stop: ep, a new epoll set, holds a new pipe stop[0]
 * under data, which the thread takes to mean "return". */
static inline int sem_stop_open(int stop[2], epoll_data_t data)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0 && pipe(stop) == 0, "epoll, pipe");
	struct epoll_event sev = {.events = EPOLLIN, .data = data};
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, stop[0], &sev) == 0, "add pipe");
	return ep;
}

/* Stops the server thread th through stop, waits for it, closes the pipe
 * and ep. */
static inline void sem_stop(pthread_t th, int stop[2], int ep)
{
	CHECK(write(stop[1], "x", 1) == 1, "stop");
	pthread_join(th, NULL);
	close(stop[0]);
	close(stop[1]);
	close(ep);
}

/* One transcript line. */
static inline void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* "ok" for r >= 0, else the errno name of the failure. */
static inline const char *rc(long r)
{
	static char buf[8][32];
	static int k;
	if (r >= 0) {
		k = (k + 1) % 8;
		snprintf(buf[k], sizeof buf[k], "%ld", r);
		return buf[k];
	}
	switch (errno) {
	case EAGAIN:
		return "EAGAIN";
	case EINTR:
		return "EINTR";
	case EBADF:
		return "EBADF";
	case EINVAL:
		return "EINVAL";
	case EEXIST:
		return "EEXIST";
	case ENOENT:
		return "ENOENT";
	case EPIPE:
		return "EPIPE";
	case ECONNRESET:
		return "ECONNRESET";
	case EINPROGRESS:
		return "EINPROGRESS";
	case ENOTCONN:
		return "ENOTCONN";
	case EISCONN:
		return "EISCONN";
	case EALREADY:
		return "EALREADY";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ELOOP:
		return "ELOOP";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EPERM:
		return "EPERM";
	}
	return strerror(errno);
}

/* Event bits by name, in a fixed order. */
static inline const char *evs(uint32_t e)
{
	static char buf[8][128];
	static int k;
	k = (k + 1) % 8;
	char *b = buf[k];
	b[0] = 0;
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {{EPOLLIN, "IN"},   {EPOLLPRI, "PRI"}, {EPOLLOUT, "OUT"}, {EPOLLERR, "ERR"},
		     {EPOLLHUP, "HUP"}, {EPOLLRDHUP, "RDHUP"}, {POLLNVAL, "NVAL"}};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (e & names[i].bit) {
			if (b[0])
				strcat(b, "|");
			strcat(b, names[i].name);
		}
	if (!b[0])
		strcpy(b, "-");
	return b;
}

static inline void set_nb(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0, "fcntl");
}

static inline int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A listening socket on 127.0.0.1, an ephemeral port; its address in *a. */
static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0, "socket");
	*a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	CHECK(bind(l, (struct sockaddr *)a, sizeof *a) == 0, "bind");
	CHECK(listen(l, 16) == 0, "listen");
	socklen_t al = sizeof *a;
	CHECK(getsockname(l, (struct sockaddr *)a, &al) == 0, "getsockname");
	return l;
}

/* A TCP connection of this process to itself: *c the connecting end,
 * *s the accepted one, both blocking. */
static void pair(int *c, int *s)
{
	struct sockaddr_in a;
	int l = listener(&a);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(*c >= 0, "socket");
	CHECK(connect(*c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
	*s = accept(l, NULL, NULL);
	CHECK(*s >= 0, "accept");
	close(l);
	sem_pairs++;
}

/* Writes n bytes of value v, whole. */
static inline void put(int fd, size_t n, int v)
{
	char buf[4096];
	memset(buf, v, sizeof buf);
	while (n > 0) {
		ssize_t w = write(fd, buf, n < sizeof buf ? n : sizeof buf);
		CHECK(w > 0, "write");
		n -= (size_t)w;
	}
}

/* Reads exactly n bytes (blocking fd), checking they are all v. */
static inline void take(int fd, size_t n, int v)
{
	char buf[4096];
	while (n > 0) {
		ssize_t r = read(fd, buf, n < sizeof buf ? n : sizeof buf);
		CHECK(r > 0, "read %zu left", n);
		for (ssize_t i = 0; i < r; i++)
			CHECK(buf[i] == (char)v, "byte %d, want %d", buf[i], v);
		n -= (size_t)r;
	}
}

/* Fills fd (made nonblocking meanwhile) until a write would block, and
 * keeps blocking over three passes 20 ms apart (buffers the kernel grows,
 * acknowledgements in flight); returns the bytes written. */
static inline size_t fill(int fd)
{
	static char buf[65536];
	size_t total = 0;
	set_nb(fd, 1);
	for (int idle = 0; idle < 3;) {
		size_t pass = 0;
		for (;;) {
			ssize_t w = write(fd, buf, sizeof buf);
			if (w < 0) {
				CHECK(errno == EAGAIN, "fill");
				break;
			}
			pass += (size_t)w;
		}
		total += pass;
		idle = pass ? 0 : idle + 1;
		usleep(20000);
	}
	set_nb(fd, 0);
	return total;
}

/* Reads whatever arrives on fd until nothing has for 200 ms, waiting in
 * poll as an event loop does (nonblocking meanwhile). */
static inline size_t drain(int fd)
{
	static char buf[65536];
	size_t total = 0;
	set_nb(fd, 1);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 200) <= 0)
			break;
		ssize_t r = read(fd, buf, sizeof buf);
		if (r <= 0)
			break;
		total += (size_t)r;
	}
	set_nb(fd, 0);
	return total;
}

/* Reads exactly n bytes whatever they are. */
static inline void discard(int fd, size_t n)
{
	static char buf[65536];
	while (n > 0) {
		ssize_t r = read(fd, buf, n < sizeof buf ? n : sizeof buf);
		CHECK(r > 0, "discard %zu left", n);
		n -= (size_t)r;
	}
}

static void sem_end(void)
{
	fprintf(stderr, "pairs %d\n", sem_pairs);
}

#endif
