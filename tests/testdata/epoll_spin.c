/*
 * epoll_spin - a kernel fd of an epoll set that holds a socket becomes
 * ready while epoll_wait polls: the interposer's wait spins through its
 * poll budget (SDPSHIM_POLL=busy: without end) and looks at the kernel's
 * list every so often. Each wait must return the fd's event once, as the
 * kernel's epoll does. Prints a transcript (sem.h).
 */
#include "sem.h"

#include <pthread.h>
#include <sys/epoll.h>

/* Makes the pipe ready 2 ms into the wait. */
static void *spin_writer(void *arg)
{
	usleep(2000);
	CHECK(write(*(int *)arg, "k", 1) == 1, "pipe write");
	return NULL;
}

static void spin_kernel(void)
{
	int c, s, pfd[2];
	pair(&c, &s);
	CHECK(pipe(pfd) == 0, "pipe");
	int ep = epoll_create1(0);
	struct epoll_event a = {.events = EPOLLIN, .data.u64 = 1}, b = {.events = EPOLLIN, .data.u64 = 2};
	CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, s, &a) == 0 && epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &b) == 0,
	      "epoll");
	struct epoll_event idle[4];
	say("spin.idle %d", epoll_wait(ep, idle, 4, 0)); /* the core's wait: the interposer answers the next */
	int waits = 50, once = 0;
	for (int i = 0; i < waits; i++) {
		pthread_t th;
		CHECK(pthread_create(&th, NULL, spin_writer, &pfd[1]) == 0, "thread");
		struct epoll_event ev[16];
		int n = epoll_wait(ep, ev, 16, 1000);
		once += n == 1 && ev[0].data.u64 == 2;
		pthread_join(th, NULL);
		char b;
		CHECK(read(pfd[0], &b, 1) == 1, "pipe read");
	}
	say("spin.kernel %d of %d waits gave the pipe once", once, waits);
	close(ep);
	close(pfd[0]);
	close(pfd[1]);
	close(c);
	close(s);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	spin_kernel();
	sem_end();
	return 0;
}
