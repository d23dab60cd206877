// Package waiting is the `sdpshim bench waiting` section (issue 7): how
// the wait policies (wait.WaitModeBusy, event, hybrid, adaptive) trade
// latency against CPU under four traffic shapes, across two processes.
//
// The parent (the client) and a child (an echo server: this executable
// re-executed, see ServePeer) share one status-byte channel over the
// shared-memory provider, with the shim's default transport sizes and
// credit flow control, both ends waiting with the mode under test. The
// client sends 64-byte requests shaped by a Shape and times each round
// trip; the echo answers each at once. Per mode and shape it reports:
//
//   - latency, half the round trip, p50 and p99;
//   - CPU time per message: user+system time of BOTH processes over the
//     measured part (getrusage RUSAGE_SELF in each), divided by the
//     requests;
//   - sleeps per message: waits on either side that ended by a doorbell
//     wake, not by polling; rings per message: doorbell rings either side
//     posted (a ring is posted only to an armed peer);
//   - mode switches of the adaptive policies (both sides, all waiters).
//
// Then an idle accelerated connection: both ends blocked in Read for the
// idle time; CPU of both processes over it, in percent of one core.
//
// Every figure is the median over repeats, each repeat a fresh pair of
// processes; the targets of issue 7 are judged against busy and hybrid
// measured in the same run.
package waiting
