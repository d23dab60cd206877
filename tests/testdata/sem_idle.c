/*
 * sem_idle - an idle server: N connections to itself whose accepted ends
 * sit in one epoll set (with a pipe) waiting forever, plus one thread
 * blocked in read() and one in poll() on connections of their own. After
 * one echo round on every connection it prints "ready" and stays idle
 * until killed; the test measures its CPU time meanwhile (/proc/PID/stat).
 *
 *   sem_idle [N]      (default 8)
 */
#include "sem.h"

#include <pthread.h>

static void *reader(void *arg)
{
	char b[16];
	ssize_t r = read(*(int *)arg, b, sizeof b); /* blocks until killed */
	CHECK(r > 0, "idle read");
	return NULL;
}

static void *poller(void *arg)
{
	struct pollfd p = {.fd = *(int *)arg, .events = POLLIN};
	CHECK(poll(&p, 1, -1) >= 0, "idle poll");
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8;
	signal(SIGPIPE, SIG_IGN);
	int ep = epoll_create1(0), pfd[2];
	CHECK(ep >= 0 && pipe(pfd) == 0, "epoll, pipe");
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = pfd[0]};
	epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev);
	int *cs = calloc((size_t)n, sizeof *cs);
	for (int i = 0; i < n; i++) {
		int s;
		pair(&cs[i], &s);
		ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.fd = s};
		epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
		put(cs[i], 1, 'i');
	}
	int got = 0;
	char b[16];
	while (got < n) {
		struct epoll_event out[16];
		int k = epoll_wait(ep, out, 16, 5000);
		CHECK(k > 0, "epoll_wait");
		for (int i = 0; i < k; i++) {
			CHECK(read(out[i].data.fd, b, 1) == 1 && write(out[i].data.fd, b, 1) == 1, "echo");
			got++;
		}
	}
	for (int i = 0; i < n; i++)
		take(cs[i], 1, 'i');
	int rc1, rs1, rc2, rs2;
	pair(&rc1, &rs1);
	pair(&rc2, &rs2);
	pthread_t t1, t2;
	pthread_create(&t1, NULL, reader, &rs1);
	pthread_create(&t2, NULL, poller, &rs2);
	sem_end();
	say("ready");
	for (;;) {
		struct epoll_event out[16];
		int k = epoll_wait(ep, out, 16, -1);
		CHECK(k >= 0 || errno == EINTR, "idle epoll_wait");
		if (k > 0)
			say("woke %d", k); /* nothing writes: the test fails on this */
	}
}
