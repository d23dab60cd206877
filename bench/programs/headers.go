package programs

import _ "embed"

// SockIO is csrc/sockio.h, the header the benchmarks' plain sockets
// programs share. bench/seed003's tenants.c includes it by its path in
// the repository, so a harness that builds tenants.c writes it at
// bench/programs/csrc/sockio.h beside bench/seed003/csrc/tenants.c.
//
//go:embed csrc/sockio.h
var SockIO []byte

// ForkHold is csrc/forkhold.h, a pre-fork server's shape (a fork child
// holding the listener), which bench/soak's soak.c and the tests'
// durable.c include by its path in the repository; a harness that builds
// soak.c writes it at bench/programs/csrc/forkhold.h beside
// bench/soak/csrc/soak.c.
//
//go:embed csrc/forkhold.h
var ForkHold []byte
