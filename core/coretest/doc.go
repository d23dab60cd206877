// Package coretest is the conformance suite every verbs.Provider must pass:
// the contracts of core/verbs/provider.go checked from both ends of a queue
// pair, with the peer in the same process and in a second process.
//
// # Running it for a provider
//
// In the provider's package, add one test file:
//
//	func TestMain(m *testing.M) {
//		coretest.ServePeer(harness)
//		os.Exit(m.Run())
//	}
//
//	var harness = coretest.Harness{
//		Name: "shm",
//		Open: func() (verbs.Provider, error) { return shm.Open() },
//	}
//
//	func TestConformance(t *testing.T) { coretest.Run(t, harness) }
//
// and run it as any test, for example
//
//	go test -race -count=1 -run Conformance ./core/shm/
//
// Run opens one Provider per side and runs every case twice, as subtests
// TestConformance/in-process/CASE (both sides in this process, each on its
// own Provider, one goroutine each) and TestConformance/cross-process/CASE
// (side B in a peer process). The peer process is the test binary itself,
// re-executed with an environment variable naming the case and one end of
// a unix socketpair as file descriptor 3; that is why ServePeer must come
// first in TestMain: in the peer it runs side B and exits, elsewhere it
// returns at once. Endpoints (with their file descriptors) and region
// descriptors travel over the socketpair, beside a small framed message
// codec the two sides use to step through a case together. The peer
// reports a failure on stderr and through its exit status; the suite shows
// both. -short runs fewer iterations.
//
// A provider that cannot run here (the rdma provider on a machine without
// an RDMA device) returns an error wrapping verbs.ErrNotSupported from
// Open; Run then skips with that error as the reason.
//
// # What it checks
//
// Each case is written once as its two sides (case_*.go): WRITE then
// inline flag WRITE seen whole by a poller, READ after WRITE, SEND/RECV
// sizes and scatter/gather, receiver-not-ready waiting, WRITE_WITH_IMM,
// post-list chains with an invalid middle request, queue-full, unsignaled
// completions, CQ overrun, concurrent posters, the notification fd (no lost wakeup), the peer
// process killed, the peer's queue pair closed, Close flushing, malformed
// requests as error completions, regions registered after Connect, and
// regions out of reach of the queue pairs of another Provider (protection
// domain), even by their key.
//
// # Failing, not hanging
//
// Nothing in the suite is timed: no case asserts that something happens
// within a bound. Every wait (link messages, completions, shared words,
// the notification fd, queue pair states) ends at the case deadline
// (EnvTimeout, default 60s, and never past the test binary's -timeout),
// where the case fails; a side stuck inside a provider call past it is
// reported and abandoned, and the peer process is killed when the test
// ends. Checks that something has not happened yet are made only where a
// correct provider cannot have done it, so they never fail one because of
// timing. EnvSeed repeats a run's random choices.
package coretest
