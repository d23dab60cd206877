/*
 * misc.c - one-shot checks of the interposed calls, each a subcommand that
 * prints "ok NAME" and exits 0, or says what went wrong and exits 1.
 * Built with -O2 -D_FORTIFY_SOURCE=2.
 *
 *   files      pipes, files, readv/writev, __read_chk, sendfile, splice
 *   fcntl      every kind of fcntl/fcntl64 argument, ioctl FIONBIO/FIONREAD
 *   dup        dup, dup2/dup3 onto and from sockets, F_DUPFD(_CLOEXEC)
 *   closerange close_range (plain, CLOEXEC), closefrom
 *   fork       fork children using inherited sockets and making new ones
 *   vfork      vfork + exec, vfork + _exit after closing a socket
 *   spawn      posix_spawn, posix_spawnp
 *   sigpipe    SIGPIPE raised by write/send, not by send(MSG_NOSIGNAL)
 *   protected  (with the fake core) its fds 100/101 are invisible
 *   udp        UDP and unix sockets only (must not load a core)
 *   unseen     (with the fake core, FAKECORE_MODE=shortrun) sockets the
 *              core never hears of: options, flags, bind and close of an
 *              unused one; two connects a plain run keeps on kernel TCP
 *   adoptrace  (with the fake core) 100 new sockets, each given a buffer
 *              size by two threads at once: the core hears of each once
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
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
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define check(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "misc: %s:%d: ", __func__, __LINE__);                      \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static size_t rdcap = 4096; /* run-time size: reads go through __read_chk */

/* A connected TCP pair over loopback: *l listener, *c client, *s server side. */
static void tcp_pair(int *l, int *c, int *s)
{
	*l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	check(bind(*l, (struct sockaddr *)&a, sizeof a) == 0 && listen(*l, 16) == 0, "bind/listen");
	check(getsockname(*l, (struct sockaddr *)&a, &al) == 0, "getsockname");
	*c = socket(AF_INET, SOCK_STREAM, 0);
	check(connect(*c, (struct sockaddr *)&a, sizeof a) == 0, "connect");
	*s = accept(*l, NULL, NULL);
	check(*s >= 0, "accept");
}

static void xfer(int from, int to, const char *msg)
{
	size_t n = strlen(msg);
	check(write(from, msg, n) == (ssize_t)n, "write %s", msg);
	char buf[256];
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(to, buf + got, rdcap < sizeof buf - got ? rdcap : sizeof buf - got);
		check(r > 0, "read %s", msg);
		got += (size_t)r;
	}
	check(memcmp(buf, msg, n) == 0, "bytes differ for %s", msg);
}

static int is_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

static int files(void)
{
	char path[] = "/tmp/sdpshim-misc-XXXXXX";
	int fd = mkstemp(path);
	check(fd >= 0, "mkstemp");
	unlink(path);
	static char big[1 << 20];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)(i * 7 + i / 4096);
	struct iovec iov[2] = {{big, 1000}, {big + 1000, sizeof big - 1000}};
	check(writev(fd, iov, 2) == (ssize_t)sizeof big, "writev file");
	check(lseek(fd, 0, SEEK_SET) == 0, "lseek");
	static char back[1 << 20];
	size_t got = 0;
	while (got < sizeof back) {
		ssize_t r = read(fd, back + got, rdcap);
		check(r > 0, "read file");
		got += (size_t)r;
	}
	check(memcmp(big, back, sizeof big) == 0, "file bytes differ");

	int p[2];
	check(pipe(p) == 0, "pipe");
	check(lseek(fd, 0, SEEK_SET) == 0, "lseek");
	loff_t off = 0;
	ssize_t sp = splice(fd, &off, p[1], NULL, 65536, 0);
	check(sp == 65536, "splice file->pipe %zd", sp);
	struct iovec rv[2] = {{back, 10}, {back + 10, 65536 - 10}};
	got = 0;
	while (got < 65536) {
		ssize_t r = got == 0 ? readv(p[0], rv, 2) : read(p[0], back + got, 65536 - got);
		check(r > 0, "readv pipe");
		got += (size_t)r;
	}
	check(memcmp(big, back, 65536) == 0, "pipe bytes differ");

	char path2[] = "/tmp/sdpshim-misc-XXXXXX";
	int out = mkstemp(path2);
	unlink(path2);
	off_t so = 0;
	check(sendfile(out, fd, &so, sizeof big) == (ssize_t)sizeof big, "sendfile file->file");
	check(pread(out, back, sizeof back, 0) == (ssize_t)sizeof back && memcmp(big, back, sizeof big) == 0,
	      "sendfile bytes differ");

	/* sendfile file -> socket, splice socket -> pipe */
	int l, c, s;
	tcp_pair(&l, &c, &s);
	so = 0;
	check(sendfile64(c, fd, (off64_t *)&so, 100000) == 100000, "sendfile file->socket");
	got = 0;
	while (got < 100000) {
		ssize_t r = splice(s, NULL, p[1], NULL, 100000 - got, 0);
		check(r > 0, "splice socket->pipe");
		ssize_t q = read(p[0], back + got, (size_t)r);
		check(q == r, "read pipe after splice");
		got += (size_t)r;
	}
	check(memcmp(big, back, 100000) == 0, "socket sendfile bytes differ");
	close(l), close(c), close(s), close(fd), close(out), close(p[0]), close(p[1]);
	printf("ok files\n");
	return 0;
}

static int fcntls(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	int fl = fcntl(c, F_GETFL);
	check(fl >= 0 && !(fl & O_NONBLOCK), "F_GETFL");
	check(fcntl(c, F_SETFL, fl | O_NONBLOCK) == 0, "F_SETFL");
	check(fcntl(c, F_GETFL) & O_NONBLOCK, "O_NONBLOCK not set");
	char b;
	check(recv(c, &b, 1, 0) < 0 && errno == EAGAIN, "nonblocking recv did not EAGAIN");
	check(fcntl64(c, F_SETFL, fl) == 0 && !(fcntl64(c, F_GETFL) & O_NONBLOCK), "fcntl64 F_SETFL");
	int d = fcntl(c, F_DUPFD, 50);
	check(d >= 50, "F_DUPFD %d", d);
	check(!(fcntl(d, F_GETFD) & FD_CLOEXEC), "F_DUPFD set cloexec");
	int e = fcntl(c, F_DUPFD_CLOEXEC, 60);
	check(e >= 60 && (fcntl(e, F_GETFD) & FD_CLOEXEC), "F_DUPFD_CLOEXEC");
	check(fcntl(e, F_SETFD, 0) == 0 && fcntl(e, F_GETFD) == 0, "F_SETFD");
	check(fcntl(c, F_SETOWN, getpid()) == 0 && fcntl(c, F_GETOWN) == getpid(), "F_SETOWN/F_GETOWN");
	struct f_owner_ex owner;
	check(fcntl(c, F_GETOWN_EX, &owner) == 0 && owner.pid == getpid(), "F_GETOWN_EX");
	xfer(d, s, "through F_DUPFD copy");
	xfer(s, e, "to F_DUPFD_CLOEXEC copy");
	/* a struct argument */
	char path[] = "/tmp/sdpshim-lock-XXXXXX";
	int f = mkstemp(path);
	unlink(path);
	struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
	check(fcntl(f, F_SETLK, &lk) == 0, "F_SETLK");
	struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10};
	check(fcntl64(f, F_GETLK, &q) == 0 && q.l_type == F_UNLCK, "F_GETLK (own lock)");
	int p[2];
	check(pipe(p) == 0, "pipe");
	check(fcntl(p[1], F_SETPIPE_SZ, 1 << 17) >= (1 << 17) && fcntl(p[1], F_GETPIPE_SZ) >= (1 << 17), "pipe size");
	/* ioctl */
	int on = 1;
	check(ioctl(c, FIONBIO, &on) == 0 && (fcntl(c, F_GETFL) & O_NONBLOCK), "FIONBIO on");
	on = 0;
	check(ioctl(c, FIONBIO, &on) == 0 && !(fcntl(c, F_GETFL) & O_NONBLOCK), "FIONBIO off");
	check(write(s, "12345", 5) == 5, "write");
	int avail = 0;
	for (int i = 0; i < 100 && avail < 5; i++) {
		check(ioctl(c, FIONREAD, &avail) == 0, "FIONREAD");
		if (avail < 5)
			usleep(1000);
	}
	check(avail == 5, "FIONREAD %d", avail);
	check(fcntl(1000000, F_GETFD) < 0 && errno == EBADF, "fcntl on a bad fd");
	printf("ok fcntl\n");
	return 0;
}

static int dups(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	int d = dup(c);
	check(d >= 0, "dup");
	xfer(d, s, "via dup");
	check(dup2(c, 100 + 7) == 107, "dup2 onto a free number");
	xfer(107, s, "via dup2");
	/* dup2 onto a live socket replaces it: the old one closes */
	int l2, c2, s2;
	tcp_pair(&l2, &c2, &s2);
	check(dup2(c, c2) == c2, "dup2 onto a socket");
	xfer(c2, s, "via the replaced number");
	char b;
	check(read(s2, &b, 1) == 0, "replaced socket not closed (peer saw no EOF)");
	check(dup3(c, 120, O_CLOEXEC) == 120 && (fcntl(120, F_GETFD) & FD_CLOEXEC), "dup3 O_CLOEXEC");
	check(dup3(c, c, 0) < 0 && errno == EINVAL, "dup3 same fd");
	check(dup2(c, c) == c, "dup2 same fd");
	check(dup2(99999, c) < 0 && errno == EBADF && is_open(c), "dup2 from a bad fd closed the target");
	/* a pipe over a socket number and back */
	int p[2];
	check(pipe(p) == 0, "pipe");
	check(dup2(p[1], d) == d, "dup2 pipe onto socket number");
	check(write(d, "x", 1) == 1 && read(p[0], &b, 1) == 1 && b == 'x', "pipe via old socket number");
	check(close(107) == 0 && close(120) == 0 && close(c2) == 0, "close copies");
	xfer(c, s, "last copy still works");
	check(close(c) == 0 && read(s, &b, 1) == 0, "closing the last copy ends the stream");
	printf("ok dup\n");
	return 0;
}

static int closerange(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	int p[2];
	check(pipe(p) == 0, "pipe");
	int hi = dup2(c, 300);
	check(hi == 300, "dup2 300");
	check(close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0, "close_range CLOEXEC");
	check(is_open(c) && (fcntl(c, F_GETFD) & FD_CLOEXEC) && (fcntl(300, F_GETFD) & FD_CLOEXEC), "CLOEXEC not set");
	int lo = l < c ? l : c;
	lo = lo < s ? lo : s;
	lo = lo < p[0] ? lo : p[0];
	check(close_range((unsigned)lo, 299, 0) == 0, "close_range");
	check(!is_open(l) && !is_open(c) && !is_open(s) && !is_open(p[0]) && !is_open(p[1]), "fds left open");
	check(is_open(300), "fd above the range closed");
	int n1 = socket(AF_INET, SOCK_STREAM, 0), n2 = socket(AF_INET, SOCK_STREAM, 0);
	check(n1 >= 0 && n2 >= 0, "sockets after close_range");
	closefrom(lo);
	check(!is_open(n1) && !is_open(n2) && !is_open(300), "closefrom left fds open");
	check(close_range(10, 5, 0) < 0 && errno == EINVAL, "close_range lo > hi");
	printf("ok closerange\n");
	return 0;
}

static int forks(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	struct sockaddr_in a;
	socklen_t al = sizeof a;
	getsockname(l, (struct sockaddr *)&a, &al);
	pid_t pid = fork();
	check(pid >= 0, "fork");
	if (pid == 0) {
		/* the inherited connection, then a new one */
		const char *m = "hello from the child";
		if (write(c, m, strlen(m)) != (ssize_t)strlen(m))
			_exit(3);
		int n = socket(AF_INET, SOCK_STREAM, 0);
		if (n < 0 || connect(n, (struct sockaddr *)&a, sizeof a) < 0 || write(n, "new", 3) != 3)
			_exit(4);
		char b[64];
		if (read(c, b, sizeof b) != 5 || memcmp(b, "reply", 5) != 0)
			_exit(5);
		close(n);
		_exit(0);
	}
	char buf[64] = {0};
	size_t got = 0;
	while (got < 20) {
		ssize_t r = read(s, buf + got, sizeof buf - got);
		check(r > 0, "read from child");
		got += (size_t)r;
	}
	check(memcmp(buf, "hello from the child", 20) == 0, "child bytes");
	int n = accept(l, NULL, NULL);
	check(n >= 0 && read(n, buf, 3) == 3 && memcmp(buf, "new", 3) == 0, "child's new connection");
	check(write(s, "reply", 5) == 5, "reply");
	int st;
	check(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %x", st);
	xfer(c, s, "parent after fork");
	printf("ok fork\n");
	return 0;
}

static int vforks(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	pid_t pid = vfork();
	if (pid == 0) {
		char *argv[] = {"/bin/sh", "-c", "exit 7", NULL};
		execve("/bin/sh", argv, environ);
		_exit(127);
	}
	int st;
	check(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7, "vfork+exec %x", st);
	/* the child closes the socket and makes one: the parent's stay */
	pid = vfork();
	if (pid == 0) {
		close(c);
		int n = socket(AF_INET, SOCK_STREAM, 0);
		_exit(n >= 0 ? 9 : 10);
	}
	check(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 9, "vfork+_exit %x", st);
	xfer(c, s, "after vfork children");
	xfer(s, c, "and back");
	printf("ok vfork\n");
	return 0;
}

static int spawns(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	pid_t pid;
	char *argv[] = {"sh", "-c", "exit 5", NULL};
	check(posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) == 0, "posix_spawn");
	int st;
	check(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 5, "posix_spawn status %x", st);
	char *argv2[] = {"true", NULL};
	check(posix_spawnp(&pid, "true", NULL, NULL, argv2, environ) == 0, "posix_spawnp");
	check(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "posix_spawnp status %x", st);
	check(posix_spawn(NULL, "/bin/true", NULL, NULL, argv2, environ) == 0, "posix_spawn without pid");
	check(wait(&st) > 0, "wait");
	check(posix_spawn(&pid, "/nonexistent/x", NULL, NULL, argv2, environ) != 0 || (waitpid(pid, &st, 0) == pid &&
	      WEXITSTATUS(st) == 127), "posix_spawn of a missing file");
	xfer(c, s, "after spawn");
	printf("ok spawn\n");
	return 0;
}

static volatile sig_atomic_t pipes;
static void on_pipe(int sig) { (void)sig, pipes++; }

static int sigpipes(void)
{
	int l, c, s;
	tcp_pair(&l, &c, &s);
	signal(SIGPIPE, on_pipe);
	close(s);
	char buf[4096] = {0};
	ssize_t r;
	int i = 0;
	do { /* the first write after the peer closed draws a RST */
		r = send(c, buf, sizeof buf, MSG_NOSIGNAL);
		usleep(1000);
	} while (r > 0 && ++i < 1000);
	check(r < 0 && (errno == EPIPE || errno == ECONNRESET), "send after close");
	check(pipes == 0, "MSG_NOSIGNAL send raised SIGPIPE");
	r = write(c, buf, sizeof buf);
	check(r < 0 && errno == EPIPE && pipes == 1, "write: r=%zd pipes=%d", r, (int)pipes);
	r = send(c, buf, sizeof buf, 0);
	check(r < 0 && errno == EPIPE && pipes == 2, "send: r=%zd pipes=%d", r, (int)pipes);
	struct iovec iov = {buf, 10};
	r = writev(c, &iov, 1);
	check(r < 0 && errno == EPIPE && pipes == 3, "writev: r=%zd pipes=%d", r, (int)pipes);
	signal(SIGPIPE, SIG_DFL);
	if (getenv("MISC_DIE") != NULL)
		if (write(c, buf, 1) < 0) /* killed by SIGPIPE before this returns */
			return 1;
	printf("ok sigpipe\n");
	return 0;
}

static int protecteds(void)
{
	int l, c, s; /* loads the fake core, which holds 100 and 101 */
	tcp_pair(&l, &c, &s);
	check(close(100) < 0 && errno == EBADF, "close(100) of a protected fd");
	check(fcntl(101, F_GETFD) < 0 && errno == EBADF, "fcntl on a protected fd");
	char b;
	check(read(100, &b, 1) < 0 && errno == EBADF, "read on a protected fd");
	check(write(101, &b, 1) < 0 && errno == EBADF, "write on a protected fd");
	struct pollfd p = {.fd = 100, .events = POLLIN};
	check(poll(&p, 1, 1000) == 1 && p.revents == POLLNVAL, "poll on a protected fd: %x", p.revents);
	fd_set r;
	FD_ZERO(&r);
	FD_SET(100, &r);
	struct timeval tv = {1, 0};
	check(select(101, &r, NULL, NULL, &tv) < 0 && errno == EBADF, "select on a protected fd");
	/* a closing loop and close_range leave them alone */
	for (int fd = 90; fd < 110; fd++)
		close(fd);
	check(close_range(90, ~0U, 0) == 0, "close_range over protected fds");
	/* dup2 onto one: the core moves away */
	check(dup2(c, 100) == 100, "dup2 onto a protected fd");
	xfer(100, s, "via the evicted number");
	int n = socket(AF_INET, SOCK_STREAM, 0);
	int sz = 65536; /* a buffer size: the core hears of n, and the fake core checks its pipe */
	check(n >= 0 && setsockopt(n, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz) == 0, "socket");
	xfer(c, s, "after all that");
	printf("ok protected\n");
	return 0;
}

static int udp(void)
{
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	check(bind(u, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(u, (struct sockaddr *)&a, &al) == 0, "bind");
	check(sendto(u, "dgram", 5, 0, (struct sockaddr *)&a, sizeof a) == 5, "sendto");
	char b[16];
	struct sockaddr_in from;
	socklen_t fl = sizeof from;
	check(recvfrom(u, b, sizeof b, 0, (struct sockaddr *)&from, &fl) == 5 && fl == sizeof from, "recvfrom");
	int sp[2];
	check(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	xfer(sp[0], sp[1], "unix");
	int t = socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP);
	(void)t; /* not TCP: never a candidate, whatever the kernel says */
	printf("ok udp\n");
	return 0;
}

/* A socket whose calls the kernel answers alone never reaches the core;
 * the fake core's listen starts a plain run of 2 connections to its port,
 * which the interposer connects without the core; the third connect, and
 * a socket given a buffer size (an option the core keeps), reach it. */
static int unseen(void)
{
	int one = 1;
	int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check(u >= 0, "socket");
	check(setsockopt(u, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0, "SO_KEEPALIVE");
	check(setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
	check(fcntl(u, F_SETFL, fcntl(u, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	check(ioctl(u, FIONBIO, &one) == 0, "FIONBIO");
	int v = 0;
	socklen_t vl = sizeof v;
	check(getsockopt(u, SOL_SOCKET, SO_KEEPALIVE, &v, &vl) == 0 && v == 1, "getsockopt SO_KEEPALIVE");
	struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	check(bind(u, (struct sockaddr *)&b, sizeof b) == 0, "bind");
	check(close(u) == 0, "close");

	int l = socket(AF_INET, SOCK_STREAM, 0); /* adopted by its listen */
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	check(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 16) == 0, "bind/listen");
	check(getsockname(l, (struct sockaddr *)&a, &al) == 0, "getsockname");
	for (int i = 0; i < 4; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		check(c >= 0, "socket %d", i);
		int sz = 65536;
		if (i == 3) /* a buffer size: adopted before its connect */
			check(setsockopt(c, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz) == 0, "SO_RCVBUF");
		check(connect(c, (struct sockaddr *)&a, sizeof a) == 0, "connect %d", i);
		int s = accept(l, NULL, NULL);
		check(s >= 0, "accept %d", i);
		xfer(c, s, "unseen");
		xfer(s, c, "and back");
		close(s);
		close(c);
	}
	close(l);
	printf("ok unseen\n");
	return 0;
}

static pthread_barrier_t race_go;
static int race_fd;

static void *race_option(void *arg)
{
	(void)arg;
	int sz = 65536;
	pthread_barrier_wait(&race_go);
	check(setsockopt(race_fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz) == 0, "SO_SNDBUF");
	return NULL;
}

/* Two threads make the first call of a new socket that the core must hear
 * of at the same moment: one adopts it, the other waits for it. */
static int adoptrace(void)
{
	pthread_barrier_init(&race_go, NULL, 3);
	for (int i = 0; i < 100; i++) {
		race_fd = socket(AF_INET, SOCK_STREAM, 0);
		check(race_fd >= 0, "socket");
		pthread_t a, b;
		check(pthread_create(&a, NULL, race_option, NULL) == 0 && pthread_create(&b, NULL, race_option, NULL) == 0,
		      "pthread_create");
		pthread_barrier_wait(&race_go);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		check(close(race_fd) == 0, "close");
	}
	printf("ok adoptrace\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("MISC_RDCAP") != NULL)
		rdcap = strtoul(getenv("MISC_RDCAP"), NULL, 0);
	const char *cmd = argc > 1 ? argv[1] : "";
	static const struct {
		const char *name;
		int (*fn)(void);
	} cmds[] = {
		{"files", files}, {"fcntl", fcntls}, {"dup", dups},         {"closerange", closerange},
		{"fork", forks},  {"vfork", vforks}, {"spawn", spawns},     {"sigpipe", sigpipes},
		{"udp", udp},     {"protected", protecteds}, {"unseen", unseen}, {"adoptrace", adoptrace},
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (strcmp(cmd, cmds[i].name) == 0)
			return cmds[i].fn();
	fprintf(stderr, "usage: misc files|fcntl|dup|closerange|fork|vfork|spawn|sigpipe|protected|udp|unseen|adoptrace\n");
	return 2;
}
