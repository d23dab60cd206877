/*
 * probecall - calls the sdpshim probes, for the probes package's tests.
 *
 *   probecall REASON FD COOKIE N
 *
 * Calls sdpshim_probe_fallback(REASON, FD, COOKIE) N times, then
 * sdpshim_probe_accelerated(1, FD, COOKIE) once, and prints the mean cost
 * of one fallback call: "ns_per_call 1.93".
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "probe.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: probecall REASON FD COOKIE N\n");
		return 2;
	}
	int reason = atoi(argv[1]), fd = atoi(argv[2]);
	uint64_t cookie = strtoull(argv[3], NULL, 0);
	long n = atol(argv[4]);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		sdpshim_probe_fallback(reason, fd, cookie);
	clock_gettime(CLOCK_MONOTONIC, &b);
	sdpshim_probe_accelerated(1, fd, cookie);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	printf("ns_per_call %.3f\n", n > 0 ? ns / n : 0.0);
	return 0;
}
