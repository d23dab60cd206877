// Package core is sdpshim's transport: the verbs-like provider interface
// and its contracts (provider.go), the status-byte block channel and its
// sliding-window baseline, stream multiplexing, the scheduler, the waiter
// and the rendezvous protocol. Providers live in their own packages
// (core/shm for one host, core/rdma for RDMA NICs); every provider passes
// the conformance suite in core/coretest.
//
// core never imports shim or flowcontrol: flow control plugs in through
// the interfaces declared here.
package core
