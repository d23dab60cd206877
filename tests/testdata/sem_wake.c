/*
 * sem_wake - wakeups of threads asleep in epoll_wait and poll over TCP
 * connections, as event loops use them: the ae pattern (EPOLL_CTL_DEL and
 * ADD of a socket around every request), a thread asleep while another
 * writes after varied delays (no wakeup may be lost: the shim writes its
 * eventfds only while a thread is armed for a sleep), two threads asleep
 * in one set, a set inside another and a set polled, and an
 * EPOLL_CTL_MOD that makes a sleeper's socket ready. Prints a transcript
 * (sem.h); a lost wakeup shows as a timeout line.
 */
#include "sem.h"

#include <pthread.h>
#include <sched.h>

#define NPAIRS 8

static int ctl(int ep, int op, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event e = {.events = events, .data.u64 = data};
	return epoll_ctl(ep, op, fd, &e);
}

/* One epoll_wait as "n data=EVENTS" (first event only). */
static const char *ew1(int ep, int timeout)
{
	static char out[128];
	struct epoll_event ev[4];
	int n = epoll_wait(ep, ev, 4, timeout);
	if (n <= 0)
		snprintf(out, sizeof out, "%s", n < 0 ? rc(n) : "0");
	else
		snprintf(out, sizeof out, "%d %llu=%s", n, (unsigned long long)ev[0].data.u64, evs(ev[0].events));
	return out;
}

/* The ae pattern: write interest added for the request and removed
 * after it, read interest added, removed after the reply. */
static void cycles(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int bad = 0;
	for (int i = 0; i < 300; i++) {
		char b = 'q';
		if (ctl(ep, EPOLL_CTL_ADD, c, EPOLLOUT, 1) != 0)
			bad++;
		struct epoll_event ev;
		if (epoll_wait(ep, &ev, 1, 2000) != 1 || ev.data.u64 != 1 || !(ev.events & EPOLLOUT))
			bad++;
		if (ctl(ep, EPOLL_CTL_DEL, c, 0, 0) != 0 || ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 2) != 0)
			bad++;
		CHECK(write(c, &b, 1) == 1, "request");
		CHECK(read(s, &b, 1) == 1, "serve");
		if (epoll_wait(ep, &ev, 1, 0) != 0) /* no reply yet */
			bad++;
		CHECK(write(s, &b, 1) == 1, "reply");
		int64_t t0 = now_ms();
		if (epoll_wait(ep, &ev, 1, 2000) != 1 || ev.data.u64 != 2 || ev.events != EPOLLIN || now_ms() - t0 > 1000)
			bad++;
		CHECK(read(c, &b, 1) == 1, "reply read");
		if (ctl(ep, EPOLL_CTL_DEL, c, 0, 0) != 0)
			bad++;
	}
	say("cycles 300 mismatches %d", bad);
	/* A deleted entry is gone for every operation, and reports nothing. */
	say("deleted.mod %s", rc(ctl(ep, EPOLL_CTL_MOD, c, EPOLLIN, 3)));
	say("deleted.del %s", rc(ctl(ep, EPOLL_CTL_DEL, c, 0, 0)));
	put(s, 3, 'x');
	say("deleted.data %s", ew1(ep, 50));
	/* Added again with data pending: level-triggered reports it, and so
	 * does edge-triggered, once. */
	say("readd.lt %s", rc(ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 4)));
	say("readd.lt.wait %s", ew1(ep, 1000));
	say("readd.lt.twice %s", rc(ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 5)));
	say("readd.del %s", rc(ctl(ep, EPOLL_CTL_DEL, c, 0, 0)));
	say("readd.et %s", rc(ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLET, 6)));
	say("readd.et.wait %s", ew1(ep, 1000));
	say("readd.et.again %s", ew1(ep, 0));
	take(c, 3, 'x');
	/* Deleted, then the fd closed and its number reused by another
	 * connection: the new one is a new entry. */
	say("reuse.del %s", rc(ctl(ep, EPOLL_CTL_DEL, c, 0, 0)));
	close(s);
	int c2, s2;
	pair(&c2, &s2);
	say("reuse.dup2 %s", rc(dup2(s2, c) == c ? 0 : -1)); /* closes the old connection's end */
	close(s2);
	int x = c, peer = c2;
	say("reuse.add %s", rc(ctl(ep, EPOLL_CTL_ADD, x, EPOLLIN, 7)));
	say("reuse.idle %s", ew1(ep, 0));
	put(peer, 1, 'y');
	say("reuse.data %s", ew1(ep, 1000));
	close(ep);
	close(c2);
	close(x);
}

struct writer {
	int fds[NPAIRS];
	int rounds;
	volatile int go; /* rounds the sleeper is ready for */
};

/* Spin, yield or sleep before write k: delays that land before, during
 * and after the sleeper's last check and kernel sleep. */
static void delay(int k)
{
	switch (k % 5) {
	case 0:
		break;
	case 1:
		sched_yield();
		break;
	case 2:
		for (volatile int i = 0; i < 2000; i++)
			;
		break;
	case 3:
		usleep(30);
		break;
	default:
		usleep(400);
	}
}

static void *write_rounds(void *arg)
{
	struct writer *w = arg;
	for (int k = 0; k < w->rounds; k++) {
		while (__atomic_load_n(&w->go, __ATOMIC_ACQUIRE) <= k)
			sched_yield();
		delay(k);
		char b = (char)k;
		CHECK(write(w->fds[(k * 7) % NPAIRS], &b, 1) == 1, "writer");
	}
	return NULL;
}

/* One thread asleep in epoll_wait (level-triggered, and edge-triggered)
 * or poll over NPAIRS connections, another writing one byte to one of
 * them per round. */
static void cross(const char *name, int mode)
{
	int c[NPAIRS], s[NPAIRS];
	struct writer w = {.rounds = 1500};
	for (int i = 0; i < NPAIRS; i++) {
		pair(&c[i], &s[i]);
		w.fds[i] = c[i];
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < NPAIRS && mode < 2; i++)
		CHECK(ctl(ep, EPOLL_CTL_ADD, s[i], EPOLLIN | (mode == 1 ? EPOLLET : 0), (uint64_t)i) == 0, "add");
	pthread_t th;
	CHECK(pthread_create(&th, NULL, write_rounds, &w) == 0, "thread");
	int lost = 0, wrong = 0;
	for (int k = 0; k < w.rounds; k++) {
		int want = (k * 7) % NPAIRS, got = -1;
		__atomic_store_n(&w.go, k + 1, __ATOMIC_RELEASE);
		int64_t t0 = now_ms();
		if (mode < 2) {
			struct epoll_event ev[NPAIRS];
			int n = epoll_wait(ep, ev, NPAIRS, 5000);
			if (n == 1)
				got = (int)ev[0].data.u64;
			else if (n == 0)
				lost++;
			else
				wrong++;
		} else {
			struct pollfd p[NPAIRS];
			for (int i = 0; i < NPAIRS; i++)
				p[i] = (struct pollfd){.fd = s[i], .events = POLLIN};
			int n = poll(p, NPAIRS, 5000);
			for (int i = 0; i < NPAIRS && n == 1; i++)
				if (p[i].revents == POLLIN)
					got = i;
			if (n == 0)
				lost++;
			else if (n != 1)
				wrong++;
		}
		if (got >= 0 && now_ms() - t0 > 1000)
			lost++; /* found when the sleep timed out: no wakeup came */
		if (got >= 0) {
			char b;
			CHECK(read(s[got], &b, 1) == 1, "read");
			if (got != want || b != (char)k)
				wrong++;
		}
		if (lost)
			break;
	}
	__atomic_store_n(&w.go, w.rounds, __ATOMIC_RELEASE); /* after a loss: the writer finishes */
	pthread_join(th, NULL);
	say("%s rounds %d lost %d wrong %d", name, w.rounds, lost, wrong);
	close(ep);
	for (int i = 0; i < NPAIRS; i++) {
		close(c[i]);
		close(s[i]);
	}
}

struct shared {
	int ep;
	int s[NPAIRS];
	int rounds;
	int handled; /* atomic */
	int lost;    /* atomic */
};

static void *sleeper(void *arg)
{
	struct shared *sh = arg;
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(sh->ep, &ev, 1, 5000);
		if (n == 0) {
			if (__atomic_load_n(&sh->handled, __ATOMIC_ACQUIRE) < sh->rounds)
				__atomic_add_fetch(&sh->lost, 1, __ATOMIC_RELAXED);
			return NULL;
		}
		CHECK(n == 1, "shared wait");
		int i = (int)ev.data.u64;
		char b;
		CHECK(read(sh->s[i], &b, 1) == 1, "shared read");
		if (b == 'q')
			return NULL;
		CHECK(ctl(sh->ep, EPOLL_CTL_MOD, sh->s[i], EPOLLIN | EPOLLONESHOT, (uint64_t)i) == 0, "rearm");
		__atomic_add_fetch(&sh->handled, 1, __ATOMIC_RELEASE);
	}
}

/* Two threads asleep in one set (one-shot entries, re-armed after each
 * read); each write is handled by one of them before the next. */
static void two_sleepers(void)
{
	struct shared sh = {.rounds = 600};
	int c[NPAIRS];
	sh.ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < NPAIRS; i++) {
		pair(&c[i], &sh.s[i]);
		CHECK(ctl(sh.ep, EPOLL_CTL_ADD, sh.s[i], EPOLLIN | EPOLLONESHOT, (uint64_t)i) == 0, "add");
	}
	pthread_t th[2];
	for (int t = 0; t < 2; t++)
		CHECK(pthread_create(&th[t], NULL, sleeper, &sh) == 0, "thread");
	int stuck = 0;
	for (int k = 0; k < sh.rounds && !stuck; k++) {
		delay(k);
		char b = 'x';
		CHECK(write(c[k % NPAIRS], &b, 1) == 1, "write");
		int64_t t0 = now_ms();
		while (__atomic_load_n(&sh.handled, __ATOMIC_ACQUIRE) <= k)
			if (now_ms() - t0 > 1000) { /* the sleepers' waits time out at 5 s */
				stuck = 1;
				break;
			} else {
				sched_yield();
			}
	}
	for (int t = 0; t < 2; t++) {
		char q = 'q';
		CHECK(write(c[t], &q, 1) == 1, "quit");
		usleep(20000);
	}
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	say("two.sleepers rounds %d handled %d stuck %d lost %d", sh.rounds, sh.handled, stuck, sh.lost);
	close(sh.ep);
	for (int i = 0; i < NPAIRS; i++) {
		close(c[i]);
		close(sh.s[i]);
	}
}

struct late {
	int fd, k;
};

static void *write_late(void *arg)
{
	struct late *l = arg;
	delay(l->k);
	char b = 'n';
	CHECK(write(l->fd, &b, 1) == 1, "late write");
	return NULL;
}

/* A set of connections inside another epoll set, and polled: a thread
 * asleep on the outer set, or in poll on the inner set's fd, wakes for
 * each write. */
static void nested(void)
{
	int c, s;
	pair(&c, &s);
	int inner = epoll_create1(EPOLL_CLOEXEC), outer = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ctl(inner, EPOLL_CTL_ADD, s, EPOLLIN, 1) == 0, "inner add");
	CHECK(ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN, 2) == 0, "outer add");
	int lost = 0, nrounds = getenv("SEM_WAKE_ROUNDS") ? atoi(getenv("SEM_WAKE_ROUNDS")) : 200;
	for (int k = 0; k < nrounds; k++) {
		struct late l = {.fd = c, .k = k};
		pthread_t th;
		CHECK(pthread_create(&th, NULL, write_late, &l) == 0, "thread");
		int64_t t0 = now_ms();
		if (k % 2 == 0) {
			struct epoll_event ev;
			if (epoll_wait(outer, &ev, 1, 2000) != 1 || ev.data.u64 != 2)
				lost++;
		} else {
			struct pollfd p = {.fd = inner, .events = POLLIN};
			if (poll(&p, 1, 2000) != 1 || p.revents != POLLIN)
				lost++;
		}
		if (now_ms() - t0 > 1000)
			lost++;
		pthread_join(th, NULL);
		char b;
		CHECK(read(s, &b, 1) == 1, "read");
		struct epoll_event ev;
		if (epoll_wait(inner, &ev, 1, 0) != 0) /* drained: the inner set is quiet */
			lost++;
	}
	say("nested rounds %d lost %d", nrounds, lost);
	close(outer);
	close(inner);
	/* The inner set in the outer one before it held any connection. */
	inner = epoll_create1(EPOLL_CLOEXEC);
	outer = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN, 2) == 0, "outer add first");
	CHECK(ctl(inner, EPOLL_CTL_ADD, s, EPOLLIN, 1) == 0, "inner add after");
	lost = 0;
	for (int k = 0; k < nrounds / 4; k++) {
		struct late l = {.fd = c, .k = k};
		pthread_t th;
		CHECK(pthread_create(&th, NULL, write_late, &l) == 0, "thread");
		int64_t t0 = now_ms();
		struct epoll_event ev;
		if (epoll_wait(outer, &ev, 1, 2000) != 1 || ev.data.u64 != 2 || now_ms() - t0 > 1000)
			lost++;
		pthread_join(th, NULL);
		char b;
		CHECK(read(s, &b, 1) == 1, "read");
		if (epoll_wait(inner, &ev, 1, 0) != 0)
			lost++;
	}
	say("nested.early rounds %d lost %d", nrounds / 4, lost);
	close(outer);
	close(inner);
	close(c);
	close(s);
}

struct modder {
	int ep, fd, k;
};

static void *mod_late(void *arg)
{
	struct modder *m = arg;
	delay(m->k);
	CHECK(ctl(m->ep, EPOLL_CTL_MOD, m->fd, EPOLLIN | EPOLLOUT, 1) == 0, "mod");
	return NULL;
}

/* EPOLL_CTL_MOD by another thread that asks a writable socket for
 * EPOLLOUT wakes a thread asleep on the set (the shim may change the
 * entry where the sleeper reads it rather than hand the set to the core),
 * and taking EPOLLOUT away again leaves nothing to report. */
static void mods(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 1) == 0, "add");
	int lost = 0, wrong = 0, nrounds = getenv("SEM_WAKE_ROUNDS") ? atoi(getenv("SEM_WAKE_ROUNDS")) : 200;
	for (int k = 0; k < nrounds; k++) {
		struct epoll_event ev;
		if (epoll_wait(ep, &ev, 1, 0) != 0) /* idle: the set settles (published) */
			wrong++;
		struct modder m = {.ep = ep, .fd = c, .k = k};
		pthread_t th;
		CHECK(pthread_create(&th, NULL, mod_late, &m) == 0, "thread");
		int64_t t0 = now_ms();
		int n = epoll_wait(ep, &ev, 1, 2000);
		if (n != 1 || now_ms() - t0 > 1000)
			lost++;
		else if (ev.data.u64 != 1 || ev.events != EPOLLOUT)
			wrong++;
		pthread_join(th, NULL);
		CHECK(ctl(ep, EPOLL_CTL_MOD, c, EPOLLIN, 1) == 0, "mod back");
		if (epoll_wait(ep, &ev, 1, 0) != 0)
			wrong++;
	}
	say("mods rounds %d lost %d wrong %d", nrounds, lost, wrong);
	close(ep);
	close(c);
	close(s);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	const char *only = argc > 1 ? argv[1] : ""; /* one part, by name (debugging) */
	if (!*only || !strcmp(only, "cycles"))
		cycles();
	if (!*only || !strcmp(only, "cross")) {
		cross("cross.lt", 0);
		cross("cross.et", 1);
		cross("cross.poll", 2);
	}
	if (!*only || !strcmp(only, "two"))
		two_sleepers();
	if (!*only || !strcmp(only, "nested"))
		nested();
	if (!*only || !strcmp(only, "mods"))
		mods();
	sem_end();
	return 0;
}
