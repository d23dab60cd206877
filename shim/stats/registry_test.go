package stats

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// fixedFlow is a flow controller's stats source with set counts.
type fixedFlow struct{ s flowcontrol.Stats }

func (f *fixedFlow) Stats() flowcontrol.Stats { return f.s }

// TestConcurrentUpdates drives senders, receivers, opens, closes and
// snapshots at once (run it with -race) and checks what every snapshot
// promises: a message is never seen without its bytes, totals never go
// back, and the final totals are exact.
func TestConcurrentUpdates(t *testing.T) {
	const (
		conns  = 8
		rounds = 2000
		msg    = 100
	)
	reg := NewRegistry(Options{})
	var wg sync.WaitGroup
	var stop atomic.Bool
	for i := range conns {
		c := reg.Open(ConnInfo{FD: 10 + i, Transport: TransportSHM, Flow: "credit"})
		c.SetFlow("credit", &fixedFlow{flowcontrol.Stats{Stalls: 1}})
		var both sync.WaitGroup
		both.Add(2)
		go func() {
			defer both.Done()
			for range rounds {
				c.Sent(msg)
				c.Preempted()
			}
		}()
		go func() {
			defer both.Done()
			for range rounds {
				c.Received(msg)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			both.Wait()
			if i%2 == 0 {
				c.Close() // its counts move to the totals
			}
		}()
	}
	// Short-lived connections registered and closed meanwhile.
	churn := make(chan struct{})
	go func() {
		defer close(churn)
		for !stop.Load() {
			c := reg.Open(ConnInfo{FD: 99, Transport: TransportRDMA})
			c.Sent(msg)
			c.Close()
		}
	}()
	var last Totals
	check := func(s *Snapshot) {
		t.Helper()
		tt := s.Totals
		if tt.BytesSent < tt.MessagesSent*msg || tt.BytesReceived < tt.MessagesReceived*msg {
			t.Fatalf("messages without their bytes: %+v", tt)
		}
		if tt.BytesSent < last.BytesSent || tt.MessagesSent < last.MessagesSent ||
			tt.BytesReceived < last.BytesReceived || tt.ConnsOpened < last.ConnsOpened {
			t.Fatalf("totals went back: %+v after %+v", tt, last)
		}
		var open uint64
		for _, c := range s.Connections {
			if c.BytesSent < c.MessagesSent*msg {
				t.Fatalf("connection %d: messages without bytes: %+v", c.ID, c)
			}
			open++
		}
		if open != tt.ConnsOpen {
			t.Fatalf("%d connections listed, totals say %d open", open, tt.ConnsOpen)
		}
		last = tt
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		check(reg.Snapshot())
	}
	stop.Store(true)
	<-churn
	s := reg.Snapshot()
	check(s)
	churned := s.Totals.ConnsOpened - conns
	if want := uint64(conns*rounds*msg) + churned*msg; s.Totals.BytesSent != want {
		t.Errorf("bytes sent %d, want %d", s.Totals.BytesSent, want)
	}
	if want := uint64(conns * rounds * msg); s.Totals.BytesReceived != want {
		t.Errorf("bytes received %d, want %d", s.Totals.BytesReceived, want)
	}
	if s.Scheduler.Preemptions != conns*rounds {
		t.Errorf("preemptions %d, want %d", s.Scheduler.Preemptions, conns*rounds)
	}
	if s.Totals.ConnsOpen != conns/2 || len(s.Connections) != conns/2 {
		t.Errorf("%d open (%d listed), want %d", s.Totals.ConnsOpen, len(s.Connections), conns/2)
	}
	if s.Flow.Stalls != conns || s.Totals.Accelerated != s.Totals.ConnsOpened {
		t.Errorf("flow stalls %d (want %d, closed ones included); accelerated %d of %d",
			s.Flow.Stalls, conns, s.Totals.Accelerated, s.Totals.ConnsOpened)
	}
}

func TestFallbacks(t *testing.T) {
	type probe struct{ reason, fd int }
	var probes []probe
	var accel int
	reg := NewRegistry(Options{
		OnFallback:          func(r, fd int, _ uint64) { probes = append(probes, probe{r, fd}) },
		OnAccelerated:       func(Transport, int, uint64) { accel++ },
		InterposerFallbacks: func(code int) uint64 { return map[int]uint64{72: 3}[code] },
	})
	peer := netip.MustParseAddrPort("127.0.0.1:6379")
	for i := range RecentFallbacks + 3 {
		reg.Fallback(FallbackInfo{Reason: 1, FD: i, Peer: peer})
	}
	reg.Fallback(FallbackInfo{Reason: 8, FD: 77})
	c := reg.Open(ConnInfo{FD: 5, Transport: TransportSHM, Peer: peer})
	c.FellBack(9)
	reg.Open(ConnInfo{FD: 6, Transport: TransportTCPFallback, Reason: 1}) // listed, not counted

	s := reg.Snapshot()
	want := []ReasonCount{{1, "peer-not-shimmed", RecentFallbacks + 3}, {8, "unsupported-option", 1}, {9, "fork-exec-decline", 1}, {72, "vfork-child", 3}}
	if len(s.Fallbacks) != len(want) {
		t.Fatalf("fallbacks %+v, want %+v", s.Fallbacks, want)
	}
	for i := range want {
		if s.Fallbacks[i] != want[i] {
			t.Errorf("fallback %d: %+v, want %+v", i, s.Fallbacks[i], want[i])
		}
	}
	if s.Totals.Fallbacks != RecentFallbacks+3+1+1+3 {
		t.Errorf("total fallbacks %d", s.Totals.Fallbacks)
	}
	if len(probes) != RecentFallbacks+5 || probes[len(probes)-1] != (probe{9, 5}) || accel != 1 {
		t.Errorf("probes %v (last want {9 5}), accelerated %d (want 1)", probes[len(probes)-3:], accel)
	}
	rf := s.RecentFallbacks
	if len(rf) != RecentFallbacks || rf[len(rf)-1].Code != 9 || rf[len(rf)-2].FD != 77 || rf[0].FD != 5 {
		t.Errorf("recent fallbacks not the last %d in order: first %+v, last %+v", RecentFallbacks, rf[0], rf[len(rf)-1])
	}
	if got := s.Connections[0]; got.Transport != "tcp-fallback" || got.Reason != 9 || got.ReasonName != "fork-exec-decline" || got.Peer != "127.0.0.1:6379" {
		t.Errorf("fell-back connection shows %+v", got)
	}
}

func TestSources(t *testing.T) {
	reg := NewRegistry(Options{})
	rmCh := reg.AddChannel(ChannelInfo{ID: 7, Transport: "statusbyte", Blocks: 64}, func() ChannelStats {
		return ChannelStats{BlocksInUse: 3, ReadSyncs: 11, RetainedSkips: 2}
	})
	rmW := reg.AddWaiter("progress", func() wait.WaiterStats {
		return wait.WaiterStats{Waits: 10, PollHits: 7, ModeSwitches: 1, Budget: -1}
	})
	s := reg.Snapshot()
	if len(s.Channels) != 1 || s.Channels[0].ID != 7 || s.Channels[0].ReadSyncs != 11 || s.Channels[0].BlocksInUse != 3 {
		t.Errorf("channels %+v", s.Channels)
	}
	if len(s.Waiters) != 1 || s.Waiters[0].PollMisses != 3 || s.Waiters[0].Budget != -1 {
		t.Errorf("waiters %+v", s.Waiters)
	}
	rmCh()
	rmW()
	rmW()
	if s := reg.Snapshot(); len(s.Channels)+len(s.Waiters) != 0 {
		t.Errorf("removed sources still listed: %+v %+v", s.Channels, s.Waiters)
	}
}

func TestReasonName(t *testing.T) {
	for code, want := range map[int]string{1: "peer-not-shimmed", 11: "peer-gone", 64: "shim-off", 72: "vfork-child", 40: "reason-40", 73: "reason-73", -1: "reason--1"} {
		if got := ReasonName(code); got != want {
			t.Errorf("ReasonName(%d) = %q, want %q", code, got, want)
		}
	}
}

// BenchmarkConnSent is the data path's cost of counting one send.
func BenchmarkConnSent(b *testing.B) {
	c := NewRegistry(Options{}).Open(ConnInfo{Transport: TransportSHM})
	for b.Loop() {
		c.Sent(64)
	}
}

// BenchmarkConnSentParallel counts on one connection per goroutine, with
// snapshots taken meanwhile: no goroutine waits for another.
func BenchmarkConnSentParallel(b *testing.B) {
	reg := NewRegistry(Options{})
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				reg.Snapshot()
			}
		}
	}()
	b.RunParallel(func(pb *testing.PB) {
		c := reg.Open(ConnInfo{Transport: TransportSHM})
		for pb.Next() {
			c.Sent(64)
		}
	})
	close(stop)
}
