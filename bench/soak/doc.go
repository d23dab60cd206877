// Package soak runs a checksummed soak (issue 12 item 8): one
// long-running server process and client processes that come and go,
// random-length messages both ways over connections that open and close,
// half-closes, and writes of 1-8 MiB among small ones, every byte
// checked end to end (csrc/soak.c, a plain sockets program).
//
// The same run is made twice for the same time, over kernel TCP and
// under the sdpshim preload, with the same seeds. Each counts
// mismatches (wrong bytes, a stream short or long), hangs (a connection
// that moved nothing for the stall limit, ended by the program's
// watchdog, or a client process that outlived its time limit), errors (a
// call failed), and under the shim fallbacks (connections the server's
// shim did not accelerate, from its stats). The server's RSS and fd count
// are sampled while it runs; the table gives both curves side by side,
// the start (after a warm-up client), the end (once the last client has
// gone and the server's fds have settled) and the most.
//
// Run is the `sdpshim bench soak` section.
package soak
