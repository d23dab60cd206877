// Package seed001 measures sdpshim's three flow controllers (docs/design.md,
// "Seed 001": Balaji et al., flow control for the Sockets Direct Protocol;
// issue 3 item 8) across two processes on the shm provider and prints
// each figure next to what the paper reports:
//
//   - unidirectional bandwidth for 256 B to 64 KiB messages, credit,
//     packed and nicassist, with 64 KiB and 256 KiB of receive buffer,
//     and the buffer utilisation of each run (bandwidth.go);
//   - the communication-progress test: bursts of 100 x 4 KiB, then 0 to
//     10 ms of computation that does not call into the stream, and the
//     time until the receiver holds the whole burst (progress.go).
//
// The controllers run as the paper describes them, straight from package
// flowcontrol: packed makes progress only when the application calls in
// (the shim adds a background flush to it; see shim/establish.go), and
// nicassist flushes from the channel's progress goroutine. Each
// measurement's other side is a child process: the running executable
// re-executed with the channel's configuration in its environment
// (ServePeer), the setup socket as its fd 3. It serves one stream per
// measurement (peer.go). Times that cross the two processes are
// CLOCK_MONOTONIC, which both share.
//
// Run is the `sdpshim bench seed001` section; the Go benchmarks in this
// package's tests call the same measuring functions.
package seed001
