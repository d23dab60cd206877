/*
 * wrapbench.c - the interposer's own cost on an UNMANAGED fd, without the
 * system call: linked with the library's sources, with sdp_real.write
 * pointed at a stub that returns at once. Times N calls of the exported
 * write() (table lookup + tail call) against N calls of the stub through
 * the same kind of indirect call, with the fd table empty and with a chunk
 * present. Prints "empty_ns X populated_ns Y" (wrapper minus stub, per call,
 * best of R rounds).
 */
#define _GNU_SOURCE 1
#include "shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef ssize_t write_fn(int, const void *, size_t);

static ssize_t stub_write(int fd, const void *b, size_t n)
{
	(void)fd, (void)b;
	__asm__ volatile("" ::: "memory");
	return (ssize_t)n;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double per_call(write_fn *volatile f, long n)
{
	char c = 0;
	double t0 = now();
	for (long i = 0; i < n; i++)
		f(7, &c, 1);
	return (now() - t0) / n;
}

static double overhead(long n, int rounds)
{
	double best_w = 1e30, best_s = 1e30;
	for (int r = 0; r < rounds; r++) {
		double w = per_call(write, n), s = per_call(stub_write, n);
		best_w = w < best_w ? w : best_w;
		best_s = s < best_s ? s : best_s;
	}
	return best_w - best_s;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	sdp_init();
	write_fn *saved = sdp_real.write;
	sdp_real.write = stub_write;
	double empty = overhead(n, rounds);
	sdp_fd_set(1000, SDPSHIM_FD_CANDIDATE); /* chunk 0 now exists */
	double populated = overhead(n, rounds);
	sdp_real.write = saved;
	printf("empty_ns %.2f populated_ns %.2f\n", empty, populated);
	return 0;
}
