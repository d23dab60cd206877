/*
 * sem_sock - socket call semantics on TCP connections: nonblocking
 * connect, accept4 flags, O_NONBLOCK by fcntl and FIONBIO, FIONREAD,
 * SIOCINQ, SIOCOUTQ, MSG_PEEK, MSG_TRUNC, MSG_WAITALL, MSG_DONTWAIT, MSG_NOSIGNAL,
 * shutdown, close with unread data, SO_LINGER, TCP_NODELAY, TCP_CORK,
 * getsockname/getpeername, SO_RCVTIMEO/SO_SNDTIMEO, and dup, dup2, dup3,
 * F_DUPFD, F_DUPFD_CLOEXEC (every copy is the same stream, which closes
 * with the last), SO_RCVBUF/SO_SNDBUF as limits, and which end keeps the
 * TIME_WAIT. Prints a transcript (sem.h).
 */
#include "sem.h"

#include <linux/sockios.h>
#include <pthread.h>
#include <sys/ioctl.h>

static volatile sig_atomic_t sigpipes;
static void on_pipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* Waits until fd is readable (or 1 s). */
static void readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	poll(&p, 1, 1000);
}

static int ioc(int fd, unsigned long req)
{
	int v = -1;
	if (ioctl(fd, req, &v) < 0)
		return -1000 - errno;
	return v;
}

static void nonblocking_connect(void)
{
	struct sockaddr_in a;
	int l = listener(&a);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int r = connect(c, (struct sockaddr *)&a, sizeof a);
	say("nbc.connect %s", rc(r));
	struct pollfd p = {.fd = c, .events = POLLOUT | POLLIN};
	r = poll(&p, 1, 2000);
	say("nbc.poll %s %s", rc(r), evs((uint32_t)p.revents));
	int err = -1;
	socklen_t el = sizeof err;
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("nbc.so_error %d", err);
	say("nbc.again %s", rc(connect(c, (struct sockaddr *)&a, sizeof a)));
	int s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	sem_pairs++;
	say("accept4.flags nonblock=%d cloexec=%d", (fcntl(s, F_GETFL) & O_NONBLOCK) != 0,
	    (fcntl(s, F_GETFD) & FD_CLOEXEC) != 0);
	char b[16];
	say("accept4.read %s", rc(read(s, b, sizeof b)));
	say("nbc.read %s", rc(read(c, b, sizeof b)));
	CHECK(write(c, "hello", 5) == 5, "write");
	readable(s);
	say("nbc.data %s", rc(read(s, b, sizeof b)));
	close(c);
	close(s);
	/* Refused: nothing listens on the port any more. */
	close(l);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&a, sizeof a);
	say("refused.connect %s", r < 0 && errno == ECONNREFUSED ? "EINPROGRESS" : rc(r));
	p = (struct pollfd){.fd = c, .events = POLLOUT};
	r = poll(&p, 1, 2000);
	say("refused.poll %s %s", rc(r), evs((uint32_t)p.revents));
	el = sizeof err;
	getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el);
	say("refused.so_error %s", err == ECONNREFUSED ? "ECONNREFUSED" : err ? "other" : "0");
	close(c);
}

/* Writes before the peer accepts: the kernel's socket takes them. */
static void early_writes(void)
{
	struct sockaddr_in a;
	int l = listener(&a);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
	say("early.blocking.write %s", rc(write(c, "early", 5)));
	say("early.writev %s", rc(send(c, "-more", 5, MSG_NOSIGNAL)));
	int s = accept(l, NULL, NULL);
	sem_pairs++;
	char b[32] = {0};
	size_t got = 0;
	while (got < 10) {
		ssize_t r = read(s, b + got, sizeof b - 1 - got);
		CHECK(r > 0, "early read");
		got += (size_t)r;
	}
	say("early.read %s", b);
	put(c, 2, 'n');
	take(s, 2, 'n');
	say("early.then.stream ok");
	close(c);
	close(s);

	/* Nonblocking, in an epoll set, shut down for writing before the
	 * accept: the data and the FIN arrive in order. */
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	say("early.nb.connect %s", rc(connect(c, (struct sockaddr *)&a, sizeof a)));
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLET, .data.u64 = 1}, out[2];
	epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
	int n = epoll_wait(ep, out, 2, 2000);
	say("early.nb.epoll %s %s", rc(n), n > 0 ? evs(out[0].events) : "-");
	say("early.nb.write %s", rc(write(c, "abc", 3)));
	say("early.nb.shutwr %s", rc(shutdown(c, SHUT_WR)));
	s = accept(l, NULL, NULL);
	sem_pairs++;
	memset(b, 0, sizeof b);
	got = 0;
	for (;;) {
		ssize_t r = read(s, b + got, sizeof b - 1 - got);
		CHECK(r >= 0, "early nb read");
		if (r == 0)
			break;
		got += (size_t)r;
	}
	say("early.nb.read %s then eof", b);
	close(ep);
	close(c);
	close(s);

	/* Closed before the accept: the acceptor reads the bytes, then EOF;
	 * with nothing written, EOF. */
	for (int k = 0; k < 2; k++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
		if (k == 0)
			put(c, 3, 'y');
		close(c);
		s = accept(l, NULL, NULL);
		sem_pairs++;
		struct timeval tv = {5, 0};
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		memset(b, 0, sizeof b);
		ssize_t r1 = k == 0 ? recv(s, b, 3, MSG_WAITALL) : 0;
		ssize_t r2 = read(s, b + 3, 4);
		say("early.closed%d %s %s then %s", k, rc(r1), b, rc(r2));
		close(s);
	}
	close(l);
}

static void nonblock_and_flags(void)
{
	int c, s;
	pair(&c, &s);
	char b[64];
	set_nb(s, 1);
	say("nb.fcntl.read %s", rc(read(s, b, sizeof b)));
	set_nb(s, 0);
	int on = 1;
	say("nb.fionbio %s", rc(ioctl(s, FIONBIO, &on)));
	say("nb.fionbio.flag %d", (fcntl(s, F_GETFL) & O_NONBLOCK) != 0);
	say("nb.fionbio.recv %s", rc(recv(s, b, sizeof b, 0)));
	on = 0;
	ioctl(s, FIONBIO, &on);
	say("nb.dontwait %s", rc(recv(s, b, sizeof b, MSG_DONTWAIT)));
	say("nb.inq.empty %d", ioc(s, FIONREAD));
	put(c, 10, 'a');
	readable(s);
	say("nb.fionread %d siocinq %d", ioc(s, FIONREAD), ioc(s, SIOCINQ));
	say("nb.peek %s", rc(recv(s, b, 4, MSG_PEEK)));
	say("nb.peek.inq %d", ioc(s, FIONREAD));
	say("nb.read3 %s", rc(read(s, b, 3)));
	say("nb.inq.after %d", ioc(s, FIONREAD));
	say("nb.read.rest %s", rc(read(s, b, sizeof b)));
	usleep(20000);
	say("nb.outq.idle %d", ioc(c, SIOCOUTQ));
	say("nb.outq.fill %s", fill(c) > 0 ? "yes" : "no");
	say("nb.outq.full %s", ioc(c, SIOCOUTQ) > 0 ? "positive" : "zero");
	set_nb(c, 1);
	say("nb.full.write %s", rc(write(c, b, 1)));
	set_nb(c, 0);
	/* SO_SNDTIMEO on a full connection: EAGAIN after the timeout. */
	struct timeval tv = {0, 100000};
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int64_t t0 = now_ms();
	ssize_t w = write(c, b, sizeof b);
	int64_t dt = now_ms() - t0;
	say("nb.sndtimeo %s waited=%s", rc(w), dt >= 90 && dt < 2000 ? "ok" : "wrong");
	drain(s);
	say("nb.outq.drained %d", ioc(c, SIOCOUTQ));
	/* SO_RCVTIMEO: EAGAIN after the timeout. */
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	t0 = now_ms();
	ssize_t r = read(s, b, sizeof b);
	dt = now_ms() - t0;
	say("nb.rcvtimeo %s waited=%s", rc(r), dt >= 90 && dt < 2000 ? "ok" : "wrong");
	struct timeval got = {0};
	socklen_t gl = sizeof got;
	getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &got, &gl);
	say("nb.rcvtimeo.get %ld.%06ld", (long)got.tv_sec, (long)got.tv_usec);
	close(c);
	close(s);
}

struct chunks {
	int fd;
};

static void *chunker(void *arg)
{
	struct chunks *k = arg;
	for (int i = 0; i < 3; i++) {
		usleep(20000);
		put(k->fd, 10, 'w');
	}
	return NULL;
}

static void recv_flags(void)
{
	int c, s;
	pair(&c, &s);
	char b[64];
	struct chunks k = {c};
	pthread_t th;
	pthread_create(&th, NULL, chunker, &k);
	say("waitall %s", rc(recv(s, b, 30, MSG_WAITALL)));
	pthread_join(th, NULL);
	put(c, 5, 'p');
	readable(s);
	say("peek.waitall %s", rc(recv(s, b, 10, MSG_PEEK)));
	say("read.after.peek %s", rc(recv(s, b, 10, 0)));
	/* MSG_TRUNC (TCP): bytes taken and dropped; the buffer is neither
	 * written nor needed (NULL skips them); with MSG_PEEK, counted. */
	put(c, 10, 't');
	readable(s);
	memset(b, 'z', 8);
	say("trunc.peek %s", rc(recv(s, NULL, 3, MSG_PEEK | MSG_TRUNC)));
	say("trunc %s", rc(recv(s, b, 4, MSG_TRUNC)));
	say("trunc.untouched %d", b[0] == 'z');
	say("trunc.null %s", rc(recv(s, NULL, 4, MSG_TRUNC)));
	say("trunc.rest %s", rc(recv(s, b, 10, 0)));
	/* Options: the kernel's answers. */
	int one = 1, v = 0;
	socklen_t vl = sizeof v;
	say("nodelay.set %s", rc(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)));
	getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
	say("nodelay.get %d", v != 0);
	say("cork.set %s", rc(setsockopt(c, IPPROTO_TCP, TCP_CORK, &one, sizeof one)));
	put(c, 3, 'k');
	int zero = 0;
	setsockopt(c, IPPROTO_TCP, TCP_CORK, &zero, sizeof zero);
	take(s, 3, 'k');
	say("cork.flushed ok");
	struct linger lg = {1, 5}, lgot = {0};
	socklen_t ll = sizeof lgot;
	say("linger.set %s", rc(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg)));
	getsockopt(c, SOL_SOCKET, SO_LINGER, &lgot, &ll);
	say("linger.get %d %d", lgot.l_onoff, lgot.l_linger);
	/* Names. */
	struct sockaddr_in cn, cp, sn, sp;
	socklen_t l1 = sizeof cn, l2 = sizeof cp, l3 = sizeof sn, l4 = sizeof sp;
	getsockname(c, (struct sockaddr *)&cn, &l1);
	getpeername(c, (struct sockaddr *)&cp, &l2);
	getsockname(s, (struct sockaddr *)&sn, &l3);
	getpeername(s, (struct sockaddr *)&sp, &l4);
	say("names %s %s len=%u", memcmp(&cn, &sp, sizeof cn) == 0 ? "match" : "differ",
	    memcmp(&cp, &sn, sizeof cp) == 0 ? "match" : "differ", (unsigned)l1);
	close(c);
	close(s);
}

static void shutdowns(void)
{
	struct sigaction sa = {.sa_handler = on_pipe};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	int c, s;
	pair(&c, &s);
	char b[16];
	say("shut.bad %s", rc(shutdown(c, 7)));
	say("shut.wr %s", rc(shutdown(c, SHUT_WR)));
	readable(s);
	say("shut.peer.eof %s", rc(read(s, b, sizeof b)));
	ssize_t w = send(c, "x", 1, MSG_NOSIGNAL);
	say("shut.write.after %s sigpipes=%d", rc(w), (int)sigpipes);
	w = write(c, "x", 1);
	say("shut.write.sigpipe %s sigpipes=%d", rc(w), (int)sigpipes);
	put(s, 4, 'r');
	readable(c);
	say("shut.still.reads %s", rc(read(c, b, sizeof b)));
	say("shut.rd %s", rc(shutdown(s, SHUT_RD)));
	say("shut.rd.read %s", rc(read(s, b, sizeof b)));
	say("shut.rdwr %s", rc(shutdown(s, SHUT_RDWR)));
	readable(c);
	say("shut.rdwr.peer %s", rc(read(c, b, sizeof b)));
	close(c);
	close(s);
	int u = socket(AF_INET, SOCK_STREAM, 0);
	say("shut.unconnected %s", rc(shutdown(u, SHUT_WR)));
	close(u);

	/* The peer closed: a write is answered with a reset, then EPIPE. */
	pair(&c, &s);
	close(c);
	readable(s);
	say("closed.read %s", rc(read(s, b, sizeof b)));
	ssize_t w1 = send(s, "x", 1, MSG_NOSIGNAL);
	usleep(50000);
	ssize_t w2 = send(s, "x", 1, MSG_NOSIGNAL);
	say("closed.writes %s sigpipes=%d", w1 == 1 ? "1" : rc(w1), (int)sigpipes);
	say("closed.write2 %s sigpipes=%d", rc(w2), (int)sigpipes);
	w1 = write(s, "x", 1);
	say("closed.write3 %s sigpipes=%d", rc(w1), (int)sigpipes);
	close(s);
	signal(SIGPIPE, SIG_IGN);
}

static void dups(void)
{
	int c, s;
	pair(&c, &s);
	char b[16];
	int d = dup(c);
	CHECK(write(d, "12", 2) == 2, "write dup");
	discard(s, 2);
	int e = fcntl(c, F_DUPFD, 100);
	int f = fcntl(c, F_DUPFD_CLOEXEC, 0);
	int g = open("/dev/null", O_RDONLY);
	int g2 = dup2(c, g);
	int h = open("/dev/null", O_RDONLY);
	int h2 = dup3(c, h, O_CLOEXEC);
	say("dup.numbers e>=100:%d f.cloexec:%d dup2:%d dup3:%d dup3.cloexec:%d same:%d", e >= 100,
	    (fcntl(f, F_GETFD) & FD_CLOEXEC) != 0, g2 == g, h2 == h, (fcntl(h, F_GETFD) & FD_CLOEXEC) != 0,
	    dup2(c, c) == c);
	say("dup3.same %s", rc(dup3(c, c, 0)));
	close(c);
	put(e, 1, 'e');
	put(f, 1, 'f');
	take(s, 1, 'e');
	take(s, 1, 'f');
	/* Data sent to the stream is read through any copy. */
	put(s, 1, 'x');
	readable(g);
	say("dup.read.copy %s", rc(read(g, b, 1)));
	close(d);
	close(e);
	close(f);
	close(g);
	struct pollfd p = {.fd = s, .events = POLLIN | POLLRDHUP};
	int r = poll(&p, 1, 50);
	say("dup.one.left %s %s", rc(r), evs((uint32_t)p.revents));
	/* dup2 onto the last copy replaces it: the stream closes. */
	int pfd[2];
	CHECK(pipe(pfd) == 0, "pipe");
	say("dup2.over %s", rc(dup2(pfd[0], h) == h));
	r = poll(&p, 1, 1000);
	say("dup.last.closed %s %s", rc(r), evs((uint32_t)p.revents));
	say("dup.eof %s", rc(read(s, b, sizeof b)));
	say("dup.is.pipe %s", rc(write(pfd[1], "z", 1) == 1 && read(h, b, 1) == 1 && b[0] == 'z'));
	close(h);
	close(pfd[0]);
	close(pfd[1]);
	close(s);

	/* An epoll entry belongs to the open file: it outlives the closed
	 * number while a copy is open. */
	pair(&c, &s);
	d = dup(c);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 5};
	epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
	close(c);
	put(s, 1, 'q');
	struct epoll_event out[2];
	r = epoll_wait(ep, out, 2, 1000);
	say("dup.epoll.survives %s data=%llu", rc(r), r > 0 ? (unsigned long long)out[0].data.u64 : 0ULL);
	take(d, 1, 'q');
	close(d);
	close(ep);
	close(s);
}

/* SO_RCVBUF and SO_SNDBUF: the values read back are the kernel's, and a
 * writer whose send buffer is set gets at most about its send buffer plus
 * the reader's receive buffer (set on the listener, passed to the socket
 * it accepts) ahead of a reader that does not read. The other way the
 * writer's send buffer is the kernel's own, which grows to megabytes: no
 * bound to print. The bound printed is coarse: the kernel and the shim
 * hold different amounts, both far below what default buffers take. */
static void buffers(void)
{
	struct sockaddr_in a;
	int l = listener(&a);
	int v = 4096;
	CHECK(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0, "listener SO_RCVBUF");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0, "SO_RCVBUF");
	CHECK(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) == 0, "SO_SNDBUF");
	CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0, "accept");
	close(l);
	sem_pairs++;
	int cr = 0, cs = 0, sr = 0;
	socklen_t len = sizeof cr;
	getsockopt(c, SOL_SOCKET, SO_RCVBUF, &cr, &len);
	getsockopt(c, SOL_SOCKET, SO_SNDBUF, &cs, &len);
	getsockopt(s, SOL_SOCKET, SO_RCVBUF, &sr, &len);
	say("bufs.get c.rcv=%d c.snd=%d s.rcv=%d", cr, cs, sr);
	size_t toc = fill(s), tos = fill(c);
	if (getenv("SEM_VERBOSE"))
		fprintf(stderr, "bufs: %zu bytes ahead to the client, %zu to the server\n", toc, tos);
	say("bufs.bounded %d", tos > 0 && tos < (64u << 10));
	say("bufs.drained %d %d", drain(c) == toc, drain(s) == tos);
	/* Raised later: the writer gets further. */
	v = 256 << 10;
	CHECK(setsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0, "SO_RCVBUF raised");
	usleep(20000);
	size_t more = fill(c);
	if (getenv("SEM_VERBOSE"))
		fprintf(stderr, "bufs: %zu bytes ahead after raising\n", more);
	say("bufs.raised %d", more > tos);
	say("bufs.drained.raised %d", drain(s) == more);
	close(c);
	close(s);
}

/* sendmsg on a unix socket with a bad control pointer, while the process
 * holds accelerated sockets (the interposer then looks at SCM_RIGHTS
 * messages): the kernel's EFAULT, no crash. */
/* The end that closed first keeps the TIME_WAIT, as on kernel TCP: a
 * server that reads the end and closes at once (a thread spinning on a
 * nonblocking read, so that it sees the end as soon as it is visible) can
 * bind its port again right away without SO_REUSEADDR. */
static void *close_when_ended(void *arg)
{
	int fd = *(int *)arg;
	char b[16];
	ssize_t r;
	int64_t until = now_ms() + 2000;
	while ((r = recv(fd, b, sizeof b, MSG_DONTWAIT)) < 0 && errno == EAGAIN && now_ms() < until)
		;
	close(fd);
	return (void *)(intptr_t)r;
}

static void time_wait_side(void)
{
	int busy = 0, eofs = 0;
	for (int i = 0; i < 20; i++) {
		struct sockaddr_in a;
		int l = listener(&a);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
		int s = accept(l, NULL, NULL);
		CHECK(s >= 0, "accept");
		close(l);
		sem_pairs++;
		pthread_t t;
		CHECK(pthread_create(&t, NULL, close_when_ended, &s) == 0, "pthread_create");
		usleep(2000); /* the server is asleep in read */
		close(c);
		void *r;
		pthread_join(t, &r);
		eofs += (intptr_t)r == 0;
		/* The server's socket may still be in LAST_ACK for a while: the
		 * client's last ACK waits for the softirq thread, which a loaded
		 * machine runs late (seen beside two CPU-bound loops, on kernel
		 * TCP as well). That holds the port too; a TIME_WAIT holds it for
		 * a minute. Look for a second. */
		int b = socket(AF_INET, SOCK_STREAM, 0), bound = 0;
		for (int k = 0; k < 100 && !(bound = bind(b, (struct sockaddr *)&a, sizeof a) == 0); k++)
			usleep(10000);
		busy += !bound;

		close(b);
	}
	say("timewait.server.eofs %d of 20", eofs);
	say("timewait.server.port.busy %d of 20", busy);
}

static void bad_control(void)
{
	int c, s, u[2];
	pair(&c, &s);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, u) == 0, "socketpair");
	char byte = 'x';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = (void *)16, .msg_controllen = 64};
	say("sendmsg.bad.control %s", rc((int)sendmsg(u[0], &m, 0)));
	close(u[0]);
	close(u[1]);
	close(c);
	close(s);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	nonblocking_connect();
	early_writes();
	nonblock_and_flags();
	recv_flags();
	shutdowns();
	dups();
	buffers();
	time_wait_side();
	bad_control();
	sem_end();
	return 0;
}
