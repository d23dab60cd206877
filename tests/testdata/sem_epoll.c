/*
 * sem_epoll - epoll, poll and select semantics on TCP connections mixed
 * with kernel fds (pipe, eventfd, timerfd, signalfd, a unix socketpair):
 * level-triggered, EPOLLET, EPOLLONESHOT and re-arming, EPOLLRDHUP,
 * EPOLLHUP/EPOLLERR, EPOLLEXCLUSIVE, epoll_ctl errors, one socket in two
 * sets, an epoll fd in another epoll set, EPOLLOUT under backpressure,
 * signal masks and EINTR. Prints a transcript (sem.h).
 */
#include "sem.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

/* epoll_wait (timeout ms) as "n: data=EVENTS ..." sorted by data. */
static const char *ew(int ep, int timeout)
{
	static char out[512];
	struct epoll_event ev[16];
	int n = epoll_wait(ep, ev, 16, timeout);
	if (n < 0) {
		snprintf(out, sizeof out, "%s", rc(n));
		return out;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ev[j - 1].data.u64 > ev[j].data.u64; j--) {
			struct epoll_event t = ev[j];
			ev[j] = ev[j - 1];
			ev[j - 1] = t;
		}
	int k = snprintf(out, sizeof out, "%d:", n);
	for (int i = 0; i < n; i++)
		k += snprintf(out + k, sizeof out - (size_t)k, " %llu=%s", (unsigned long long)ev[i].data.u64,
			      evs(ev[i].events));
	return out;
}

static int ctl(int ep, int op, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event e = {.events = events, .data.u64 = data};
	return epoll_ctl(ep, op, fd, &e);
}

static void level(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	say("lt.add %s", rc(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT, 1)));
	say("lt.idle %s", ew(ep, 0));
	put(c, 5, 'a');
	say("lt.data %s", ew(ep, 1000));
	say("lt.again %s", ew(ep, 0));
	say("lt.mod %s", rc(ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN, 2)));
	say("lt.in %s", ew(ep, 0));
	take(s, 2, 'a');
	say("lt.partial %s", ew(ep, 0));
	take(s, 3, 'a');
	say("lt.drained %s", ew(ep, 0));
	say("lt.del %s", rc(ctl(ep, EPOLL_CTL_DEL, s, 0, 0)));
	put(c, 1, 'b');
	say("lt.deleted %s", ew(ep, 50));
	take(s, 1, 'b');
	close(ep);
	close(c);
	close(s);
}

static void edge(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(0);
	say("et.add %s", rc(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLET, 7)));
	say("et.first %s", ew(ep, 1000));
	say("et.second %s", ew(ep, 0));
	put(c, 5, 'a');
	say("et.data %s", ew(ep, 1000));
	say("et.nothing.new %s", ew(ep, 0));
	take(s, 2, 'a');
	say("et.partial.read %s", ew(ep, 0));
	put(c, 5, 'b');
	say("et.more %s", ew(ep, 1000));
	say("et.more.again %s", ew(ep, 0));
	take(s, 3, 'a');
	take(s, 5, 'b');
	say("et.drained %s", ew(ep, 0));
	/* Re-arming by EPOLL_CTL_MOD reports what is ready now. */
	say("et.mod %s", rc(ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLOUT | EPOLLET, 8)));
	say("et.mod.ready %s", ew(ep, 1000));
	say("et.mod.again %s", ew(ep, 0));
	/* EPOLLIN only, then the peer's FIN is a new edge. */
	say("et.mod.in %s", rc(ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLRDHUP | EPOLLET, 9)));
	say("et.in.idle %s", ew(ep, 0));
	shutdown(c, SHUT_WR);
	say("et.fin %s", ew(ep, 1000));
	say("et.fin.again %s", ew(ep, 0));
	close(ep);
	close(c);
	close(s);
}

static void oneshot(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create(4);
	say("os.add %s", rc(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLONESHOT, 3)));
	say("os.idle %s", ew(ep, 0));
	put(c, 4, 'a');
	say("os.data %s", ew(ep, 1000));
	say("os.disabled %s", ew(ep, 0));
	put(c, 4, 'b');
	say("os.still.disabled %s", ew(ep, 50));
	say("os.rearm %s", rc(ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLONESHOT, 4)));
	say("os.rearmed %s", ew(ep, 1000));
	say("os.disabled.again %s", ew(ep, 0));
	take(s, 4, 'a');
	take(s, 4, 'b');
	say("os.rearm.empty %s", rc(ctl(ep, EPOLL_CTL_MOD, s, EPOLLIN | EPOLLONESHOT | EPOLLET, 5)));
	say("os.empty %s", ew(ep, 0));
	put(c, 1, 'c');
	say("os.et.data %s", ew(ep, 1000));
	put(c, 1, 'd');
	say("os.et.disabled %s", ew(ep, 50));
	say("os.del %s", rc(ctl(ep, EPOLL_CTL_DEL, s, 0, 0)));
	say("os.del.again %s", rc(ctl(ep, EPOLL_CTL_DEL, s, 0, 0)));
	discard(s, 2);
	close(ep);
	close(c);
	close(s);
}

static void hangups(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 1);
	say("hup.open %s", ew(ep, 0));
	shutdown(c, SHUT_WR);
	say("hup.peer.shutwr %s", ew(ep, 1000));
	char b[4];
	say("hup.eof %s", rc(read(s, b, sizeof b)));
	shutdown(s, SHUT_WR);
	say("hup.both %s", ew(ep, 1000));
	close(ep);
	close(c);
	close(s);

	pair(&c, &s);
	ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT, 2); /* no RDHUP asked */
	shutdown(s, SHUT_RD);
	say("hup.shutrd %s", ew(ep, 1000));
	shutdown(s, SHUT_WR);
	say("hup.shutrdwr %s", ew(ep, 1000));
	close(ep);
	close(c);
	close(s);

	/* A reset: the peer closes with SO_LINGER 0. */
	pair(&c, &s);
	ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 3);
	struct linger lg = {1, 0};
	setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(c);
	say("rst.events %s", ew(ep, 1000));
	int err = 0;
	socklen_t el = sizeof err;
	getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
	say("rst.so_error %s", err == ECONNRESET ? "ECONNRESET" : err ? "other" : "0");
	say("rst.after.so_error %s", ew(ep, 1000));
	say("rst.read %s", rc(read(s, b, sizeof b)));
	close(ep);
	close(s);

	/* The peer closes with unread data: a reset too. */
	pair(&c, &s);
	ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLRDHUP, 4);
	put(s, 3, 'x');
	usleep(20000);
	close(c);
	say("unread.close %s", ew(ep, 1000));
	say("unread.read %s", rc(read(s, b, sizeof b)));
	say("unread.read2 %s", rc(read(s, b, sizeof b)));
	close(ep);
	close(s);
}

static void errors_and_exclusive(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(0), ep2 = epoll_create1(0);
	int pfd[2];
	CHECK(pipe(pfd) == 0, "pipe");
	say("err.add %s", rc(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1)));
	say("err.add.twice %s", rc(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1)));
	say("err.mod.missing %s", rc(ctl(ep, EPOLL_CTL_MOD, c, EPOLLIN, 1)));
	say("err.del.missing %s", rc(ctl(ep, EPOLL_CTL_DEL, c, 0, 0)));
	say("err.self %s", rc(ctl(ep, EPOLL_CTL_ADD, ep, EPOLLIN, 1)));
	say("err.not.epoll %s", rc(ctl(pfd[0], EPOLL_CTL_ADD, s, EPOLLIN, 1)));
	say("err.badf %s", rc(ctl(ep, EPOLL_CTL_ADD, 999, EPOLLIN, 1)));
	say("err.bad.epfd %s", rc(ctl(999, EPOLL_CTL_ADD, s, EPOLLIN, 1)));
	say("err.bad.op %s", rc(ctl(ep, 77, s, EPOLLIN, 1)));
	say("err.wait.maxevents %s", rc(epoll_wait(ep, (struct epoll_event[1]){0}, 0, 0)));
	say("excl.add %s", rc(ctl(ep2, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLEXCLUSIVE, 9)));
	say("excl.mod %s", rc(ctl(ep2, EPOLL_CTL_MOD, s, EPOLLIN, 9)));
	say("excl.oneshot %s", rc(ctl(ep2, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, 9)));
	put(c, 2, 'e');
	say("excl.data %s", ew(ep2, 1000));
	say("excl.level %s", ew(ep2, 0));
	say("excl.del %s", rc(ctl(ep2, EPOLL_CTL_DEL, s, 0, 0)));
	take(s, 2, 'e');
	close(pfd[0]);
	close(pfd[1]);
	close(ep);
	close(ep2);
	close(c);
	close(s);
}

static void sets_and_nesting(void)
{
	int c, s;
	pair(&c, &s);
	int e1 = epoll_create1(0), e2 = epoll_create1(0), outer = epoll_create1(0);
	ctl(e1, EPOLL_CTL_ADD, s, EPOLLIN, 11);
	ctl(e2, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLET, 22);
	say("multi.outer.add %s", rc(ctl(outer, EPOLL_CTL_ADD, e1, EPOLLIN, 100)));
	say("multi.nest.loop %s", rc(ctl(e1, EPOLL_CTL_ADD, outer, EPOLLIN, 1)));
	say("multi.idle %s %s %s", ew(e1, 0), ew(e2, 0), ew(outer, 0));
	put(c, 3, 'm');
	say("multi.outer %s", ew(outer, 1000));
	say("multi.e1 %s", ew(e1, 1000));
	say("multi.e2 %s", ew(e2, 1000));
	say("multi.e2.again %s", ew(e2, 0));
	say("multi.outer.level %s", ew(outer, 0));
	say("multi.e1.level %s", ew(e1, 0));
	struct pollfd p = {.fd = e1, .events = POLLIN};
	int pr = poll(&p, 1, 0);
	say("multi.poll.epfd %s %s", rc(pr), evs((uint32_t)p.revents));
	say("multi.del.e1 %s", rc(ctl(e1, EPOLL_CTL_DEL, s, 0, 0)));
	say("multi.e1.after %s", ew(e1, 0));
	say("multi.outer.after %s", ew(outer, 0));
	put(c, 1, 'n');
	say("multi.e2.new %s", ew(e2, 1000));
	discard(s, 4);
	close(outer);
	close(e1);
	close(e2);
	close(c);
	close(s);
}

static void mixed(void)
{
	int c, s;
	pair(&c, &s);
	int pfd[2], up[2];
	CHECK(pipe(pfd) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, up) == 0, "pipe");
	int efd = eventfd(0, EFD_NONBLOCK);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR2);
	sigprocmask(SIG_BLOCK, &m, NULL);
	int sfd = signalfd(-1, &m, SFD_NONBLOCK);
	int ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1);
	ctl(ep, EPOLL_CTL_ADD, pfd[0], EPOLLIN, 2);
	ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 3);
	ctl(ep, EPOLL_CTL_ADD, tfd, EPOLLIN, 4);
	ctl(ep, EPOLL_CTL_ADD, sfd, EPOLLIN, 5);
	ctl(ep, EPOLL_CTL_ADD, up[0], EPOLLIN | EPOLLOUT, 6);
	say("mix.idle %s", ew(ep, 0));
	CHECK(write(pfd[1], "p", 1) == 1, "pipe write");
	say("mix.pipe %s", ew(ep, 1000));
	uint64_t one = 1;
	CHECK(write(efd, &one, 8) == 8, "eventfd");
	struct itimerspec its = {.it_value = {0, 20000000}};
	timerfd_settime(tfd, 0, &its, NULL);
	usleep(40000);
	raise(SIGUSR2);
	put(c, 2, 'z');
	usleep(20000);
	say("mix.all %s", ew(ep, 1000));
	char buf[128];
	CHECK(read(pfd[0], buf, 1) == 1 && read(efd, buf, 8) == 8 && read(tfd, buf, 8) == 8, "reads");
	CHECK(read(sfd, buf, sizeof(struct signalfd_siginfo)) == sizeof(struct signalfd_siginfo), "signalfd");
	say("mix.socket.only %s", ew(ep, 0));
	take(s, 2, 'z');
	say("mix.unix.only %s", ew(ep, 0));

	/* poll, ppoll, select, pselect over the same mix. */
	struct pollfd p[4] = {{.fd = s, .events = POLLIN | POLLOUT}, {.fd = pfd[0], .events = POLLIN},
			      {.fd = efd, .events = POLLIN}, {.fd = c, .events = POLLIN | POLLRDHUP}};
	int r = poll(p, 4, 0);
	say("poll.idle %s %s %s %s %s", rc(r), evs((uint32_t)p[0].revents), evs((uint32_t)p[1].revents),
	    evs((uint32_t)p[2].revents), evs((uint32_t)p[3].revents));
	put(c, 1, 'q');
	CHECK(write(pfd[1], "p", 1) == 1, "pipe write");
	usleep(20000);
	struct timespec ts = {1, 0};
	r = ppoll(p, 4, &ts, NULL);
	say("ppoll.ready %s %s %s %s %s", rc(r), evs((uint32_t)p[0].revents), evs((uint32_t)p[1].revents),
	    evs((uint32_t)p[2].revents), evs((uint32_t)p[3].revents));
	fd_set rd, wr;
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(s, &rd);
	FD_SET(pfd[0], &rd);
	FD_SET(efd, &rd);
	FD_SET(c, &wr);
	struct timeval tv = {1, 0};
	r = select(FD_SETSIZE > 1024 ? 1024 : FD_SETSIZE, &rd, &wr, NULL, &tv);
	say("select %s r:%d%d%d w:%d", rc(r), FD_ISSET(s, &rd), FD_ISSET(pfd[0], &rd), FD_ISSET(efd, &rd),
	    FD_ISSET(c, &wr));
	take(s, 1, 'q');
	CHECK(read(pfd[0], buf, 1) == 1, "pipe read");
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	FD_SET(pfd[0], &rd);
	ts = (struct timespec){0, 30000000};
	r = pselect(1024, &rd, NULL, NULL, &ts, NULL);
	say("pselect.timeout %s r:%d%d", rc(r), FD_ISSET(s, &rd), FD_ISSET(pfd[0], &rd));
	int gone = dup(0);
	close(gone);
	struct pollfd nv[2] = {{.fd = s, .events = POLLIN}, {.fd = gone, .events = POLLIN}};
	r = poll(nv, 2, 0);
	say("poll.nval %s %s %s", rc(r), evs((uint32_t)nv[0].revents), evs((uint32_t)nv[1].revents));
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	FD_SET(gone, &rd);
	tv = (struct timeval){0, 0};
	say("select.badf %s", rc(select((gone > s ? gone : s) + 1, &rd, NULL, NULL, &tv)));
	close(ep);
	close(sfd);
	close(tfd);
	close(efd);
	close(pfd[0]);
	close(pfd[1]);
	close(up[0]);
	close(up[1]);
	close(c);
	close(s);
}

static void backpressure(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, c, EPOLLOUT, 1);
	say("bp.writable %s", ew(ep, 1000));
	size_t n = fill(c);
	say("bp.full %s", ew(ep, 100));
	struct pollfd p = {.fd = c, .events = POLLOUT};
	int pr = poll(&p, 1, 50);
	say("bp.poll.full %s %s", rc(pr), evs((uint32_t)p.revents));
	fd_set wr;
	FD_ZERO(&wr);
	FD_SET(c, &wr);
	struct timeval tv = {0, 50000};
	say("bp.select.full %s", rc(select(c + 1, NULL, &wr, NULL, &tv)));
	int ep2 = epoll_create1(0);
	ctl(ep2, EPOLL_CTL_ADD, c, EPOLLOUT | EPOLLET, 2);
	say("bp.et.full %s", ew(ep2, 50));
	discard(s, n);
	say("bp.drained %s", ew(ep, 1000));
	say("bp.et.drained %s", ew(ep2, 1000));
	say("bp.et.drained.again %s", ew(ep2, 0));
	p.revents = 0;
	pr = poll(&p, 1, 1000);
	say("bp.poll.drained %s %s", rc(pr), evs((uint32_t)p.revents));
	/* A write that found no room, then room made before any wait: the
	 * next wait of an edge-triggered entry that already reported
	 * EPOLLOUT reports it again (the kernel's SOCK_NOSPACE). */
	n = fill(c);
	discard(s, n);
	say("bp.et.room.before.wait %s", ew(ep2, 1000));
	say("bp.et.room.before.wait.again %s", ew(ep2, 0));
	close(ep2);
	close(ep);
	close(c);
	close(s);
}

static volatile sig_atomic_t handled;
static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

struct kicker {
	pthread_t target;
	int ms;
};

static void *kick(void *arg)
{
	struct kicker *k = arg;
	usleep((useconds_t)k->ms * 1000);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

static void signals(void)
{
	int c, s;
	pair(&c, &s);
	struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	int ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1);
	struct epoll_event ev[4];
	/* A signal during the wait: EINTR even with SA_RESTART. */
	struct kicker k = {pthread_self(), 50};
	pthread_t th;
	pthread_create(&th, NULL, kick, &k);
	int r = epoll_wait(ep, ev, 4, 5000);
	pthread_join(th, NULL);
	say("sig.epoll_wait %s handled=%d", rc(r), (int)handled);
	/* Blocked in the process, pending: epoll_pwait with a mask that
	 * unblocks it fails at once; epoll_wait times out. */
	sigset_t m, empty;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	sigemptyset(&empty);
	sigprocmask(SIG_BLOCK, &m, NULL);
	raise(SIGUSR1);
	r = epoll_wait(ep, ev, 4, 30);
	say("sig.blocked.epoll_wait %s handled=%d", rc(r), (int)handled);
	r = epoll_pwait(ep, ev, 4, 5000, &empty);
	say("sig.epoll_pwait.unblocks %s handled=%d", rc(r), (int)handled);
	raise(SIGUSR1);
	struct timespec ts = {5, 0};
	r = epoll_pwait2(ep, ev, 4, &ts, &empty);
	say("sig.epoll_pwait2.unblocks %s handled=%d", rc(r), (int)handled);
	raise(SIGUSR1);
	struct pollfd p = {.fd = s, .events = POLLIN};
	r = ppoll(&p, 1, &ts, &empty);
	say("sig.ppoll.unblocks %s handled=%d", rc(r), (int)handled);
	raise(SIGUSR1);
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	r = pselect(s + 1, &rd, NULL, NULL, &ts, &empty);
	say("sig.pselect.unblocks %s handled=%d", rc(r), (int)handled);
	sigprocmask(SIG_UNBLOCK, &m, NULL);
	/* A mask that blocks the signal sent during the wait. */
	pthread_create(&th, NULL, kick, &k);
	r = epoll_pwait(ep, ev, 4, 200, &m);
	say("sig.epoll_pwait.masked %s handled=%d", rc(r), (int)handled);
	pthread_join(th, NULL);
	pthread_create(&th, NULL, kick, &k);
	r = poll(&p, 1, 5000);
	pthread_join(th, NULL);
	say("sig.poll %s handled=%d", rc(r), (int)handled);
	/* Data wins over nothing: a ready socket is reported. */
	put(c, 1, 's');
	r = epoll_pwait(ep, ev, 4, 1000, &empty);
	say("sig.ready %s", rc(r));
	take(s, 1, 's');
	close(ep);
	close(c);
	close(s);
}

struct later {
	int fd;
	int ms;
};

static void *write_later(void *arg)
{
	struct later *w = arg;
	usleep((useconds_t)w->ms * 1000);
	put(w->fd, 1, 'L');
	return NULL;
}

/* dup2 onto descriptors this process cannot see (open in /proc but EBADF
 * to fcntl: the shim's own eventfds): the program gets the number (or
 * EBUSY for one that cannot move), and waits keep working. Counts go to
 * stderr (none on kernel TCP), the waits to the transcript. */
static void evictions(void)
{
	int c, s;
	pair(&c, &s);
	int ep = epoll_create1(0);
	ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 1);
	struct pollfd p = {.fd = c, .events = POLLIN};
	poll(&p, 1, 10); /* gives c its eventfd */
	int null = open("/dev/null", O_RDONLY), moved = 0, busy = 0;
	int fds[4096], nfds = 0;
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL, "opendir");
	for (struct dirent *de; (de = readdir(d)) != NULL && nfds < 4096;)
		if (de->d_name[0] != '.')
			fds[nfds++] = atoi(de->d_name);
	closedir(d);
	for (int i = 0; i < nfds; i++) {
		int fd = fds[i];
		char path[64], link[64] = {0};
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		if (readlink(path, link, sizeof link - 1) < 0 || fcntl(fd, F_GETFD) >= 0 || errno != EBADF ||
		    strcmp(link, "anon_inode:[eventfd]") != 0)
			continue;
		if (dup2(null, fd) == fd) {
			moved++;
			close(fd);
		} else {
			CHECK(errno == EBUSY, "dup2 onto a hidden fd");
			busy++;
		}
	}
	close(null);
	fprintf(stderr, "evicted %d busy %d\n", moved, busy);
	put(c, 1, 'v');
	say("evict.epoll %s", ew(ep, 1000));
	take(s, 1, 'v');
	struct later w = {c, 50};
	pthread_t th;
	pthread_create(&th, NULL, write_later, &w);
	say("evict.epoll.sleep %s", ew(ep, 2000));
	pthread_join(th, NULL);
	take(s, 1, 'L');
	w.fd = s;
	pthread_create(&th, NULL, write_later, &w);
	p.revents = 0;
	int r = poll(&p, 1, 2000);
	say("evict.poll.sleep %s %s", rc(r), evs((uint32_t)p.revents));
	pthread_join(th, NULL);
	take(c, 1, 'L');
	close(ep);
	close(c);
	close(s);
}

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	level();
	edge();
	oneshot();
	hangups();
	errors_and_exclusive();
	sets_and_nesting();
	mixed();
	backpressure();
	signals();
	evictions();
	sem_end();
	return 0;
}
