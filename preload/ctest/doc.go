// Package ctest tests libsdpshim.so, the C interposer of preload/c, from the
// outside: its tests build the library with preload/c/build.sh and the C
// programs of testdata/ with gcc into a temporary directory, and run them,
// and real programs (python3 -m http.server, curl, a Go program), with
// LD_PRELOAD.
//
// Three set-ups recur. "plain" runs without the library; "passthrough" runs
// with it and no core to load (every fd stays UNMANAGED, as in a build
// without the Go core); "fakecore" loads testdata/fakecore.c, a core written
// in C that marks connected sockets MANAGED and moves their bytes through
// every hook of the ABI over the kernel socket, logging what it sees.
//
// SDPSHIM_CTEST_CORE=/abs/path/libsdpshim-core.so adds a fourth set-up,
// "realcore", that runs the same programs and byte checks with the real Go
// core.
//
// Tests skip when gcc (or python3, curl, go) is missing, except in CI
// (CI=true), where a missing tool fails them.
package ctest
