// Package verbs is the provider contract (provider.go): a NIC seen
// through verbs, with registered regions, reliable-connected queue pairs,
// completion queues, work requests and completions, the errors providers
// return, and the Endpoint a queue pair is connected with (endpoint.go:
// its bytes and descriptors passed over a unix socket).
//
// Providers implement it (core/shm on one host, core/rdma between hosts)
// and pass core/coretest; everything above is written only against it.
// It imports nothing of sdpshim.
package verbs
