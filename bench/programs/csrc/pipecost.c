/*
 * pipecost: the cost of one call on a descriptor the shim does not manage.
 * Writes one byte into a pipe and reads it back, N times, and prints the
 * mean nanoseconds per call (a write or a read) of the best of R rounds:
 *
 *   pipecost [N [R]]   ->   {"ns_per_call":..}
 *
 * Run with and without LD_PRELOAD; the difference is the passthrough cost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 15;
	int p[2];
	char c = 'x';
	if (pipe(p) < 0) {
		perror("pipe");
		return 1;
	}
	double best = 0;
	for (int r = 0; r < rounds; r++) {
		double t0 = now();
		for (long i = 0; i < n; i++) {
			if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1) {
				perror("pipe i/o");
				return 1;
			}
		}
		double per = (now() - t0) / (2.0 * n);
		if (r == 0 || per < best)
			best = per;
	}
	printf("{\"ns_per_call\":%.2f}\n", best);
	return 0;
}
