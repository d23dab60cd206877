/* forkuse - what a fork child's first use of an inherited connection
 * costs, and what the fork itself costs, for a process that holds an
 * accelerated connection.
 *
 *   forkuse server PORT
 *       Echoes 64-byte messages on each connection, one connection at a
 *       time, until EOF. Runs until killed.
 *   forkuse client PORT N
 *       N times: connect (close-on-exec, as a program that forks without
 *       meaning to hand its sockets on), 100 round trips, fork(); the child
 *       times its first round trip on the connection (its first use) and
 *       its second, tells the parent through a pipe and exits; the parent
 *       waits for it and closes. Then, with no connection open, N times
 *       a fork whose child exits at once and the parent's wait for it
 *       (what a fork-per-connection server pays for each child apart
 *       from the connection: the copy and the teardown of its address
 *       space and fd table). Prints {"fork_first_us": the first fork()
 *       of the process, "fork_us", "use_us", "next_us", "cycle_us":
 *       medians over the N}. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "sockio.h"

#define MSG 64
#define WARM 100
#define MAXN 1000

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void round_trip(int c)
{
	char b[MSG];
	memset(b, 'f', sizeof b);
	if (full(c, b, MSG, 0) != 0 || full(c, b, MSG, 1) != 0)
		die("round trip");
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	if (argc != 3 + (argc > 1 && strcmp(argv[1], "client") == 0)) {
		fprintf(stderr, "usage: forkuse server PORT | forkuse client PORT N\n");
		return 2;
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (strcmp(argv[1], "server") == 0) {
		int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 64) != 0)
			die("listen");
		char b[MSG];
		for (;;) {
			int c = accept(l, NULL, NULL);
			if (c < 0)
				continue;
			nodelay(c);
			while (full(c, b, MSG, 1) == 0 && full(c, b, MSG, 0) == 0)
				;
			close(c);
		}
	}
	int n = atoi(argv[3]);
	if (n < 1 || n > MAXN)
		die("N");
	static double forks[MAXN], uses[MAXN], nexts[MAXN], cycles[MAXN];
	double first = 0;
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0)
			die("connect");
		nodelay(c);
		for (int k = 0; k < WARM; k++)
			round_trip(c);
		int p[2];
		if (pipe(p) != 0)
			die("pipe");
		double f0 = now_us();
		pid_t pid = fork();
		double f1 = now_us();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			double t[2], t0 = now_us();
			round_trip(c);
			double t1 = now_us();
			round_trip(c);
			t[0] = t1 - t0;
			t[1] = now_us() - t1;
			_exit(write(p[1], t, sizeof t) == sizeof t ? 0 : 1);
		}
		close(p[1]);
		double t[2];
		int st;
		if (full(p[0], (char *)t, sizeof t, 1) != 0 || waitpid(pid, &st, 0) != pid || st != 0)
			die("child");
		close(p[0]);
		close(c);
		if (i == 0)
			first = f1 - f0;
		forks[i] = f1 - f0;
		uses[i] = t[0];
		nexts[i] = t[1];
	}
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			_exit(0);
		int st;
		if (waitpid(pid, &st, 0) != pid || st != 0)
			die("child");
		cycles[i] = now_us() - t0;
	}
	printf("{\"fork_first_us\": %.1f, \"fork_us\": %.1f, \"use_us\": %.1f, \"next_us\": %.1f, \"cycle_us\": %.1f}\n",
	       first, median(forks, n), median(uses, n), median(nexts, n), median(cycles, n));
	return 0;
}
