/* setup - what opening a connection costs: connect, accept, one 64-byte
 * round trip, close, one connection after another.
 *
 *   setup server own PORT       one process accepts on its own listener
 *   setup server prefork PORT   the listener is made, then two forked
 *                               workers accept on it (a pre-fork server,
 *                               whose connections the shim defers)
 *       Each connection: read 64 bytes, write them back, read to EOF,
 *       close. Runs until killed.
 *   setup client PORT N
 *       N connections one after another; prints {"us_per_conn": X}, the
 *       wall time of the N divided by N. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "sockio.h"

#define MSG 64

static void serve(int l)
{
	char b[MSG];
	for (;;)
		echo_conn(l, b, MSG);
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "server") == 0) {
		struct sockaddr_in a = loopback(atoi(argv[3]));
		int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 512) != 0)
			die("listen");
		if (strcmp(argv[2], "prefork") != 0)
			serve(l);
		for (int i = 0; i < 2; i++)
			if (fork() == 0)
				serve(l);
		close(l);
		while (wait(NULL) > 0)
			;
		return 0;
	}
	if (argc != 4 || strcmp(argv[1], "client") != 0) {
		fprintf(stderr, "usage: setup server own|prefork PORT | setup client PORT N\n");
		return 2;
	}
	struct sockaddr_in a = loopback(atoi(argv[2]));
	int n = atoi(argv[3]);
	char b[MSG], r[MSG];
	memset(b, 'x', sizeof b);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0)
			die("connect");
		if (full(nodelay(c), b, MSG, 0) != 0 || full(c, r, MSG, 1) != 0 || memcmp(b, r, MSG) != 0)
			die("echo");
		close(c);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
	printf("{\"us_per_conn\": %.1f}\n", us / n);
	return 0;
}
