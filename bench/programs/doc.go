// Package programs measures unmodified programs (sockperf, iperf3,
// redis, nginx with wrk, memcached, postgres with pgbench) over kernel TCP
// and under the sdpshim preload in the same run, and reports each figure
// as the median of repeats with its ratio and target; it also measures
// the passthrough cost of a call on an unmanaged descriptor and checks
// that a program making no sockets never loads the Go core. It backs the
// "programs" section of `sdpshim bench`.
package programs
