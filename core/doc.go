// Package core holds no code: its subpackages are sdpshim's transport,
// cut by layer. A package imports only packages of lower layers
// (tests/layering_test.go checks it), and nothing imports core itself.
//
//	layer 0  sharedmem    atomic access to memory another process writes
//	         fdhook       reporting the descriptors the core holds
//	         direct       the direct data path's handle over the C protocol
//	         sockdiag     which socket holds a local TCP connection's
//	                      other end (the kernel's socket diagnostics)
//	         random       random bytes from the kernel (nonces, tokens)
//	layer 1  verbs        the provider contract: regions, queue pairs,
//	                      completion queues, work requests, its errors
//	         wait         waiting: Doorbell and WaitPolicy contracts, the
//	                      Waiter and its policies, ParkFD, WaitFD
//	layer 2  wire         the block header and control-record codec, the
//	                      channel's errors, and the contracts of what
//	                      carries blocks (Transport, Retainer, BlockCounter,
//	                      BellPair) and what paces them (FlowController)
//	layer 3  shm, rdma    providers, each a verbs.Provider
//	         coretest     the conformance suite every provider passes
//	         setup        channel setup: the hello exchange and the Link
//	                      (data and doorbell queue pairs) it establishes
//	         rendezvous   same-host negotiation before the TCP SYN
//	layer 4  doorbell     Bells: the wait.Doorbell contract over a Link
//	layer 5  statusbyte,  the transports, each a wire.Transport
//	         slidingwindow
//	layer 6  mux          Channel and Stream: stream multiplexing over one
//	                      transport, the scheduler, progress goroutines
//
// Flow control plugs in from outside: package flowcontrol implements
// wire.FlowController and imports nothing else of the core. The shim sits
// above all of it.
package core
