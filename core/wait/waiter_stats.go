package wait

import "sync/atomic"

// WaiterStats is a snapshot of a waiter's counters, for the stats socket.
// Each field is read atomically on its own; the set is not one instant.
type WaiterStats struct {
	Waits        uint64 // finished Wait calls
	Polls        uint64 // checks of the condition (ready calls)
	PollHits     uint64 // waits that ended ready without sleeping
	Sleeps       uint64 // doorbell sleeps (each a sleep/wake transition)
	Yields       uint64 // sched_yield calls while polling
	ModeSwitches uint64 // policy changes between polling and event mode
	Budget       int64  // budget handed to the latest wait: -1 busy, 0 event mode
}

// Misses returns the waits that slept or gave up.
func (s WaiterStats) Misses() uint64 { return s.Waits - s.PollHits }

// Stats loads hits before waits and a wait counts itself in waits before
// hits, so a snapshot never shows more hits than waits.

type waiterCounters struct {
	waits, polls, hits, sleeps, yields, switches atomic.Uint64
	budget                                       atomic.Int64
}

// Stats returns the counters. It is safe to call from any goroutine at any
// time and takes no lock.
func (w *Waiter) Stats() WaiterStats {
	hits := w.c.hits.Load()
	return WaiterStats{
		Waits:        w.c.waits.Load(),
		Polls:        w.c.polls.Load(),
		PollHits:     hits,
		Sleeps:       w.c.sleeps.Load(),
		Yields:       w.c.yields.Load(),
		ModeSwitches: w.c.switches.Load(),
		Budget:       w.c.budget.Load(),
	}
}
