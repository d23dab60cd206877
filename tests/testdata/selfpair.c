/*
 * selfpair - a process that connects to itself over TCP and checks socket
 * semantics on that connection, written like any plain sockets program.
 * Every check must pass on kernel TCP; run under the shim it must pass
 * the same way (the tests run it both ways).
 *
 *   selfpair [-n] [-b BYTES]
 *       -n      connect nonblocking (EINPROGRESS, poll for POLLOUT, SO_ERROR)
 *       -b      bytes to move each way in the bulk check (default 4 MiB)
 *
 * Prints one JSON line: {"ok":true,"kernel_bytes":N} where kernel_bytes is
 * the payload the kernel's TCP carried (tcpi_bytes_received of both ends,
 * summed): about 0 when the connection is accelerated. Exit status 0 when
 * every check passed, 1 otherwise (the failed check on stderr).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "selfpair: line %d: ", __LINE__);                  \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));        \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + i / 251); }

struct bulk {
	int fd;
	size_t n;
};

static void *bulk_send(void *arg)
{
	struct bulk *b = arg;
	unsigned char buf[70000];
	size_t off = 0;
	while (off < b->n) {
		size_t k = b->n - off < sizeof buf ? b->n - off : sizeof buf;
		k = k > 1 + off % 65000 ? 1 + off % 65000 : k; /* varied sizes */
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i);
		ssize_t w = write(b->fd, buf, k);
		CHECK(w > 0, "bulk write");
		off += (size_t)w;
	}
	return NULL;
}

static void bulk_recv(int fd, size_t n)
{
	unsigned char buf[50000];
	size_t off = 0;
	while (off < n) {
		ssize_t r = read(fd, buf, sizeof buf);
		CHECK(r > 0, "bulk read at %zu of %zu: %zd", off, n, r);
		for (ssize_t i = 0; i < r; i++)
			CHECK(buf[i] == pattern(off + (size_t)i), "bulk byte %zu corrupt", off + (size_t)i);
		off += (size_t)r;
	}
}

static uint64_t kernel_bytes(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	memset(&ti, 0, sizeof ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) != 0)
		return 0;
	return ti.tcpi_bytes_received;
}

static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0, "fcntl");
}

int main(int argc, char **argv)
{
	int nonblock = 0;
	size_t bulk = 4u << 20;
	int opt;
	while ((opt = getopt(argc, argv, "nb:")) != -1) {
		if (opt == 'n')
			nonblock = 1;
		else if (opt == 'b')
			bulk = strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	signal(SIGPIPE, SIG_IGN);

	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0, "socket");
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0, "bind");
	CHECK(listen(l, 8) == 0, "listen");
	socklen_t al = sizeof a;
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0, "getsockname");

	int c = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	CHECK(c >= 0, "socket");
	int r = connect(c, (struct sockaddr *)&a, sizeof a);
	if (nonblock) {
		CHECK(r == 0 || errno == EINPROGRESS, "nonblocking connect");
	} else {
		CHECK(r == 0, "connect");
	}
	int s = accept(l, NULL, NULL);
	CHECK(s >= 0, "accept");
	if (nonblock) {
		struct pollfd p = {.fd = c, .events = POLLOUT};
		CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT), "poll POLLOUT after connect: %d", p.revents);
		int err = -1;
		socklen_t el = sizeof err;
		CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0, "SO_ERROR %d", err);
		set_nonblock(c, 0);
	}

	/* Small message, peek, FIONREAD, MSG_WAITALL. */
	CHECK(write(c, "hello world", 11) == 11, "write");
	struct pollfd p = {.fd = s, .events = POLLIN};
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN), "poll POLLIN");
	char buf[64];
	int avail = 0;
	for (int i = 0; i < 1000 && avail < 11; i++) {
		CHECK(ioctl(s, FIONREAD, &avail) == 0, "FIONREAD");
		if (avail < 11)
			usleep(1000);
	}
	CHECK(avail == 11, "FIONREAD says %d", avail);
	CHECK(recv(s, buf, 5, MSG_PEEK) == 5 && memcmp(buf, "hello", 5) == 0, "MSG_PEEK");
	CHECK(recv(s, buf, 11, MSG_WAITALL) == 11 && memcmp(buf, "hello world", 11) == 0, "MSG_WAITALL");

	/* Nonblocking read with nothing there: EAGAIN; MSG_DONTWAIT likewise. */
	CHECK(recv(s, buf, sizeof buf, MSG_DONTWAIT) == -1 && errno == EAGAIN, "MSG_DONTWAIT");
	set_nonblock(s, 1);
	CHECK(read(s, buf, sizeof buf) == -1 && errno == EAGAIN, "O_NONBLOCK read");
	set_nonblock(s, 0);

	/* writev / readv across iovecs; sendmsg / recvmsg. */
	struct iovec wv[3] = {{"ab", 2}, {"cde", 3}, {"fghij", 5}};
	CHECK(writev(s, wv, 3) == 10, "writev");
	char r1[4], r2[6];
	struct iovec rv[2] = {{r1, 4}, {r2, 6}};
	struct msghdr m = {.msg_iov = rv, .msg_iovlen = 2};
	CHECK(recvmsg(c, &m, MSG_WAITALL) == 10 && memcmp(r1, "abcd", 4) == 0 && memcmp(r2, "efghij", 6) == 0,
	      "writev/recvmsg");

	/* dup: the copy works, and closing one copy keeps the connection. */
	int d = dup(c);
	CHECK(d >= 0, "dup");
	CHECK(write(d, "x", 1) == 1 && read(s, buf, 1) == 1 && buf[0] == 'x', "dup write");
	CHECK(close(d) == 0, "close dup");
	CHECK(write(c, "y", 1) == 1 && read(s, buf, 1) == 1 && buf[0] == 'y', "write after closing a dup");

	/* Bulk both ways at once (threads), byte-checked. */
	struct bulk b1 = {c, bulk}, b2 = {s, bulk};
	pthread_t t1, t2;
	pthread_create(&t1, NULL, bulk_send, &b1);
	pthread_create(&t2, NULL, bulk_send, &b2);
	bulk_recv(s, bulk);
	bulk_recv(c, bulk);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	/* sendfile from a file, with and without an offset; splice from a pipe
	 * into the socket and from the socket into a pipe. */
	char tmpl[] = "/tmp/selfpairXXXXXX";
	int f = mkstemp(tmpl);
	CHECK(f >= 0, "mkstemp");
	unlink(tmpl);
	size_t fsz = 300000;
	unsigned char *fbuf = malloc(fsz), *got = malloc(fsz);
	for (size_t i = 0; i < fsz; i++)
		fbuf[i] = pattern(i + 13);
	CHECK(write(f, fbuf, fsz) == (ssize_t)fsz, "write file");
	off_t off = 1000;
	size_t left = fsz - 1000;
	while (left > 0) {
		ssize_t k = sendfile(c, f, &off, left);
		CHECK(k > 0, "sendfile with offset");
		left -= (size_t)k;
	}
	CHECK(off == (off_t)fsz, "sendfile offset %lld", (long long)off);
	CHECK(recv(s, got, fsz - 1000, MSG_WAITALL) == (ssize_t)(fsz - 1000) && memcmp(got, fbuf + 1000, fsz - 1000) == 0,
	      "sendfile bytes");
	CHECK(lseek(f, 5, SEEK_SET) == 5, "lseek");
	left = 1000;
	while (left > 0) {
		ssize_t k = sendfile(c, f, NULL, left);
		CHECK(k > 0, "sendfile");
		left -= (size_t)k;
	}
	CHECK(lseek(f, 0, SEEK_CUR) == 1005, "file offset after sendfile");
	CHECK(recv(s, got, 1000, MSG_WAITALL) == 1000 && memcmp(got, fbuf + 5, 1000) == 0, "sendfile bytes 2");
	int pp[2];
	CHECK(pipe(pp) == 0, "pipe");
	CHECK(write(pp[1], "spliced", 7) == 7, "pipe write");
	CHECK(splice(pp[0], NULL, c, NULL, 7, 0) == 7, "splice pipe to socket");
	CHECK(recv(s, buf, 7, MSG_WAITALL) == 7 && memcmp(buf, "spliced", 7) == 0, "splice bytes");
	CHECK(write(s, "tosplice", 8) == 8, "write for splice");
	ssize_t sp = 0;
	while (sp < 8) {
		ssize_t k = splice(c, NULL, pp[1], NULL, 8 - (size_t)sp, 0);
		CHECK(k > 0, "splice socket to pipe");
		sp += k;
	}
	CHECK(read(pp[0], buf, 8) == 8 && memcmp(buf, "tosplice", 8) == 0, "splice to pipe bytes");
	close(pp[0]);
	close(pp[1]);
	close(f);
	free(fbuf);
	free(got);

	uint64_t kb = kernel_bytes(c) + kernel_bytes(s);

	/* Half close: EOF after the data, the other direction still works. */
	CHECK(write(c, "bye", 3) == 3, "write before shutdown");
	CHECK(shutdown(c, SHUT_WR) == 0, "shutdown");
	CHECK(recv(s, buf, sizeof buf, MSG_WAITALL) == 3 && memcmp(buf, "bye", 3) == 0, "data before EOF");
	CHECK(read(s, buf, sizeof buf) == 0, "EOF after shutdown");
	p = (struct pollfd){.fd = s, .events = POLLIN | POLLRDHUP};
	CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN) && (p.revents & POLLRDHUP), "poll at EOF: %#x",
	      p.revents);
	CHECK(write(s, "back", 4) == 4, "write after peer's shutdown");
	CHECK(recv(c, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "back", 4) == 0, "read after own shutdown");
	CHECK(write(c, "z", 1) == -1 && errno == EPIPE, "write after shutdown: EPIPE");

	/* Close: the peer reads EOF. */
	CHECK(close(s) == 0, "close");
	CHECK(read(c, buf, sizeof buf) == 0, "EOF after the peer's close");
	close(c);
	close(l);
	printf("{\"ok\":true,\"kernel_bytes\":%llu}\n", (unsigned long long)kb);
	return 0;
}
