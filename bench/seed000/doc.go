// Package seed000 measures the status-byte block channel against its
// sliding-window baseline (docs/design.md, "Seed 000"; issue 3 item 8) across two
// processes on the shm provider, and prints each figure next to the
// paper's (Xiao et al., Appl. Sci. 2024):
//
//   - sync control latency against the number of blocks (syncLatency);
//   - transmission latency, throughput and the sender's CPU per MiB for
//     payloads of 64 B to 8 MiB (transmit);
//   - the retained-block timeline: block 3 held from 100 ms to 200 ms,
//     throughput per 10 ms (retainTimeline);
//   - 12 camera streams at 25 frames/s of 640x480x3 bytes (camera).
//
// Every experiment runs its other side in a child process: the running
// executable re-executed with the experiment in the environment
// (ServePeer), the socket of the setup exchange as its fd 3 and its
// report as JSON on its stdout. Timestamps that cross the two processes
// are CLOCK_MONOTONIC nanoseconds (monoNow), which both share.
//
// Run is the `sdpshim bench seed000` section; the Go benchmarks in this
// package's tests call the same measuring functions.
package seed000
