// Package rdma is sdpshim's between-hosts provider: verbs.Provider on
// rdma-core (libibverbs for the data path, librdmacm for route checks),
// reliable-connected queue pairs one to one.
//
// # Building
//
// The provider needs cgo and the rdma-core headers and libraries
// (Debian: libibverbs-dev librdmacm-dev, plus rdma-core and
// ibverbs-providers at run time), so it is behind the build tag rdma:
//
//	go build -tags rdma ./...
//
// Without the tag (or off Linux) the package still builds, with no cgo:
// Open and Resolve return an error wrapping verbs.ErrNotSupported that says
// how to build with RDMA.
//
// # Ownership
//
// Open returns a *Provider that owns one device context, one protection
// domain and a goroutine reading the device's asynchronous events; Close
// releases them once every region, completion queue and queue pair made
// from it is closed. Regions own an anonymous shared mapping registered as
// one memory region. Completion queues own their completion channel and
// the epoll and eventfd descriptors behind NotifyFD. Queue pairs own
// preallocated C memory for work requests, so posting does not allocate;
// no Go pointer is ever stored in C memory. A queue pair closed with work
// outstanding is moved to the error state at once and destroyed when its
// flush completions have been polled (or when its completion queues
// close), so the flushes reach the poller as the contract requires.
//
// # Files
//
// Pure Go, built everywhere and unit-tested without a device: tables.go
// (every verbs enum mapped to its core counterpart, in one place),
// endpoint.go (the versioned queue pair description), translate.go
// (core work requests to the C layout, with the post-time checks),
// ring.go (per-queue accounting of outstanding requests), options.go.
// Linux with the tag: verbs.go (the cgo layer and layout checks) and one
// file per object.
package rdma
