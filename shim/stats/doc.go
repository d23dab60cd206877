// Package stats is the observability root of one shimmed process: a
// registry of counters that the data path updates without locks or
// contention, a versioned snapshot of them (Snapshot, JSON-able), the
// per-process stats socket that serves that snapshot (Serve), the client
// side that `sdpshim stats` and `sdpshim top` use to find and read those
// sockets (List, Fetch), and the Prometheus text rendering (WriteProm).
//
// Who updates what:
//
//   - The data path owns a *Conn per connection (Registry.Open) and calls
//     Sent, Received and Preempted on it: atomic adds to counters that only
//     that connection's threads touch, send and receive sides on separate
//     cache lines. Nothing on that path takes a lock or allocates.
//   - Components that already keep their own atomic counters (flow
//     controllers, waiters, transports) are not copied: they register a
//     read function (Conn.SetFlow, Registry.AddChannel, Registry.AddWaiter)
//     that a snapshot calls. Those functions must not block or lock.
//   - Setup-time events (Open, Close, Fallback, FellBack, Add*) take the
//     registry's lock; so does Snapshot, which therefore sees a consistent
//     set of connections: a closed connection's counts move into the
//     process totals in the same critical section that unlists it.
//
// A Registry lives as long as the process; Conns live from Open to Close.
// The stats server reads the registry from its own goroutine and never
// blocks the data path (see Serve).
package stats
