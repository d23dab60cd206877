// Package flowcontrol holds sdpshim's per-stream flow controllers (seed 001,
// Balaji et al.: three ways to keep a sender from overrunning the
// receiver's buffers), one file per algorithm behind wire.FlowController:
//
//   - credit (credit.go): one write per block, K credits per stream, credits
//     returned in ControlCredit records once half of K are used; the writer
//     waits when out of credits.
//   - packed (packed.go, "RDMA-based" in the paper): writes packed into
//     blocks; the receiver's space is learned by the transport's status
//     READ, so the controller never makes the stream wait; bytes that find
//     the channel full are coalesced in the send buffer and go out only when
//     the application next calls in (the paper's progress problem).
//   - nicassist (nicassist.go): packed plus receiver-posted virtual windows
//     of W bytes (ControlWindow records); held bytes are flushed by the
//     stream's progress goroutine as soon as a window post arrives.
//
// New picks an algorithm by name and validates its Params; it returns a
// factory the stream calls once per stream end. The stream owns the
// controller and calls every wire.FlowController method under the stream's
// lock; controllers keep no lock of their own. Both ends of a stream must
// be built from the same Params: a sending end validates the peer's control
// records against them, a receiving end the blocks that arrive (Arrived).
// Signature names an algorithm with its Params for the setup exchange, so
// that a mismatch fails the channel's setup instead.
//
// Progress: credit holds nothing once Write returns; nicassist flushes held
// bytes from the channel's progress goroutine when a window post arrives;
// packed, as in the paper, sends held bytes only when the application next
// calls in. That is what the seed 001 benchmarks (bench/seed001) measure.
// The shim, which must never leave a transparent socket's bytes behind the
// application's back, runs packed with a background flush instead
// (shim/establish.go says so per algorithm).
//
// One optional ability the caller type-asserts for (every controller here
// has it): StatsSource, a lock-free snapshot of the shared accounting
// (stats.go, base.go) that any goroutine may take at any time.
package flowcontrol
