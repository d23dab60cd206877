/*
 * ctorlib.c - a library whose constructor uses TCP before libsdpshim's own
 * constructor has run (initialisers run in reverse load order, and the
 * preloaded library loads first): listen, connect, accept, send, recv,
 * close, all from inside the constructor.
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *ctorlib_result = "constructor did not run";

__attribute__((constructor)) static void early(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al)) {
		ctorlib_result = "listen failed";
		return;
	}
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) {
		ctorlib_result = "connect failed";
		return;
	}
	int s = accept(l, NULL, NULL);
	char buf[8] = {0};
	if (s < 0 || send(c, "early", 5, 0) != 5 || recv(s, buf, 5, MSG_WAITALL) != 5 ||
	    memcmp(buf, "early", 5) != 0) {
		ctorlib_result = "exchange failed";
		return;
	}
	close(s);
	close(c);
	close(l);
	ctorlib_result = "ok";
}
