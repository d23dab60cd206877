package stats

import "testing"

// TestSchedulerCounts: a connection's scheduler counts kept outside it
// (SetExtra, a channel stream's preemptions and pauses) show in its row
// and in the scheduler totals, and stay in the totals once folded and
// closed.
func TestSchedulerCounts(t *testing.T) {
	reg := NewRegistry(Options{})
	c := reg.Open(ConnInfo{FD: 3, Transport: TransportSHM})
	c.Preempted()
	c.SetExtra(func() Extra { return Extra{Preemptions: 3, Pauses: 2} })
	s := reg.Snapshot()
	if len(s.Connections) != 1 || s.Connections[0].Preemptions != 4 || s.Connections[0].Pauses != 2 {
		t.Fatalf("connection rows %+v, want one with 4 preemptions and 2 pauses", s.Connections)
	}
	if s.Scheduler.Preemptions != 4 || s.Scheduler.Pauses != 2 {
		t.Fatalf("scheduler totals %+v, want 4 preemptions and 2 pauses", s.Scheduler)
	}
	c.FoldExtra()
	c.Close()
	s = reg.Snapshot()
	if len(s.Connections) != 0 || s.Scheduler.Preemptions != 4 || s.Scheduler.Pauses != 2 {
		t.Fatalf("after close: %d rows, scheduler %+v, want none and 4 preemptions, 2 pauses", len(s.Connections), s.Scheduler)
	}
}
