package wait

import (
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBell records the calls made on it. Sleep returns the next of sleeps
// (nil once they run out); the hooks run inside Arm and Sleep, to make the
// condition true at that moment.
type fakeBell struct {
	log     []string
	armErr  error
	sleeps  []error
	onArm   func()
	onSleep func()
}

func (b *fakeBell) Arm() error {
	b.log = append(b.log, "arm")
	if b.onArm != nil {
		b.onArm()
	}
	return b.armErr
}

func (b *fakeBell) Sleep(time.Time) error {
	b.log = append(b.log, "sleep")
	if b.onSleep != nil {
		b.onSleep()
	}
	if len(b.sleeps) == 0 {
		return nil
	}
	err := b.sleeps[0]
	b.sleeps = b.sleeps[1:]
	return err
}

func (b *fakeBell) Disarm() { b.log = append(b.log, "disarm") }

var _ Doorbell = (*fakeBell)(nil)

// recPolicy hands out a fixed budget and records what it is told; it
// checks that every Budget is followed by one Observe.
type recPolicy struct {
	t        *testing.T
	budget   int
	open     int
	obs      []observation
	switches uint64
}

type observation struct {
	polls  int
	hit    bool
	events int
}

func (p *recPolicy) Budget(time.Time) int {
	if p.open != 0 {
		p.t.Errorf("Budget with %d waits not observed", p.open)
	}
	p.open++
	return p.budget
}

func (p *recPolicy) Observe(_ time.Time, polls int, hit bool, events int) {
	if p.open != 1 {
		p.t.Errorf("Observe with %d open Budget calls, want 1", p.open)
	}
	p.open--
	p.obs = append(p.obs, observation{polls, hit, events})
}

func (p *recPolicy) ModeSwitches() uint64 { return p.switches }

// readyOnCall returns a condition that is true from its n-th check on.
func readyOnCall(n int) func() bool {
	calls := 0
	return func() bool { calls++; return calls >= n }
}

var errTestGone = errors.New("test: channel gone")

func TestWaiter(t *testing.T) {
	far := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Second)
	for _, tc := range []struct {
		name     string
		budget   int
		readyAt  int // 0: never
		deadline time.Time
		bell     fakeBell
		wantErr  error
		wantLog  []string
		wantObs  observation
		want     WaiterStats
	}{
		{name: "ready at once", budget: 8, readyAt: 1, bell: fakeBell{},
			wantObs: observation{1, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 1, PollHits: 1}},
		{name: "ready at once in event mode", budget: 0, readyAt: 1,
			wantObs: observation{1, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 1, PollHits: 1}},
		{name: "poll hit, yields every 16 polls", budget: 100, readyAt: 40,
			wantObs: observation{40, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 40, PollHits: 1, Yields: 2}},
		{name: "hit on the last poll of the budget", budget: 5, readyAt: 5,
			wantObs: observation{5, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 5, PollHits: 1}},
		{name: "re-check after arm finds it", budget: 5, readyAt: 6,
			wantLog: []string{"arm", "disarm"},
			wantObs: observation{5, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 6, PollHits: 1}},
		{name: "sleep, then ready", budget: 5, readyAt: 7,
			wantLog: []string{"arm", "sleep"},
			wantObs: observation{5, false, 1},
			want:    WaiterStats{Waits: 1, Polls: 7, Sleeps: 1}},
		{name: "event mode arms after one check", budget: 0, readyAt: 3,
			wantLog: []string{"arm", "sleep"},
			wantObs: observation{1, false, 1},
			want:    WaiterStats{Waits: 1, Polls: 3, Sleeps: 1}},
		{name: "spurious wake sleeps again", budget: 5, readyAt: 9,
			wantLog: []string{"arm", "sleep", "arm", "sleep"},
			wantObs: observation{5, false, 1},
			want:    WaiterStats{Waits: 1, Polls: 9, Sleeps: 2}},
		{name: "deadline while asleep", budget: 5, bell: fakeBell{sleeps: []error{os.ErrDeadlineExceeded}},
			wantErr: os.ErrDeadlineExceeded, wantLog: []string{"arm", "sleep"},
			wantObs: observation{5, false, 0},
			want:    WaiterStats{Waits: 1, Polls: 7, Sleeps: 1}},
		{name: "deadline passed: no arm", budget: 5, deadline: past,
			wantErr: os.ErrDeadlineExceeded,
			wantObs: observation{5, false, 0},
			want:    WaiterStats{Waits: 1, Polls: 5}},
		{name: "busy honours the deadline", budget: -1, deadline: past,
			wantErr: os.ErrDeadlineExceeded,
			wantObs: observation{16, false, 0},
			want:    WaiterStats{Waits: 1, Polls: 16, Yields: 1, Budget: -1}},
		{name: "busy never sleeps", budget: -1, readyAt: 1000,
			wantObs: observation{1000, true, 1},
			want:    WaiterStats{Waits: 1, Polls: 1000, PollHits: 1, Yields: 62, Budget: -1}},
		{name: "sleep error", budget: 5, bell: fakeBell{sleeps: []error{errTestGone}},
			wantErr: errTestGone, wantLog: []string{"arm", "sleep"},
			wantObs: observation{5, false, 0},
			want:    WaiterStats{Waits: 1, Polls: 7, Sleeps: 1}},
		{name: "arm error", budget: 5, bell: fakeBell{armErr: errTestGone},
			wantErr: errTestGone, wantLog: []string{"arm"},
			wantObs: observation{5, false, 0},
			want:    WaiterStats{Waits: 1, Polls: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &recPolicy{t: t, budget: tc.budget, switches: 3}
			w := NewWaiter(p)
			ready := func() bool { return false }
			if tc.readyAt > 0 {
				ready = readyOnCall(tc.readyAt)
			}
			deadline := tc.deadline
			if deadline.IsZero() {
				deadline = far
			}
			bell := tc.bell
			err := w.Wait(ready, &bell, deadline)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Wait = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(bell.log, tc.wantLog) {
				t.Errorf("doorbell calls %q, want %q", bell.log, tc.wantLog)
			}
			if len(p.obs) != 1 || p.obs[0] != tc.wantObs || p.open != 0 {
				t.Errorf("observed %+v (%d open), want [%+v]", p.obs, p.open, tc.wantObs)
			}
			want := tc.want
			want.ModeSwitches, want.Budget = 3, int64(tc.budget)
			if got := w.Stats(); got != want {
				t.Errorf("Stats = %+v\n          want %+v", got, want)
			}
		})
	}
}

// The condition wins over a doorbell failure that happens with it.
func TestWaiterReadyWinsOverBellError(t *testing.T) {
	var ready atomic.Bool
	for _, bell := range []*fakeBell{
		{sleeps: []error{errTestGone}, onSleep: func() { ready.Store(true) }},
		{sleeps: []error{os.ErrDeadlineExceeded}, onSleep: func() { ready.Store(true) }},
		{armErr: errTestGone, onArm: func() { ready.Store(true) }},
	} {
		ready.Store(false)
		p := &recPolicy{t: t, budget: 2}
		if err := NewWaiter(p).Wait(ready.Load, bell, time.Time{}); err != nil {
			t.Errorf("calls %q: Wait = %v, want nil", bell.log, err)
		}
		if slices.Contains(bell.log, "disarm") {
			t.Errorf("calls %q: Disarm after a failed Arm or a Sleep", bell.log)
		}
		if len(p.obs) != 1 || p.obs[0].events != 1 {
			t.Errorf("observed %+v, want one event", p.obs)
		}
	}
}

func TestWaiterNilPolicyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewWaiter(nil) did not panic")
		}
	}()
	NewWaiter(nil)
}

// Waits from several goroutines share one policy; Stats reads the counters
// meanwhile without locks (run under -race).
func TestWaiterConcurrentWaitsAndStats(t *testing.T) {
	pol, err := NewAdaptivePolicy(DefaultPollParams())
	if err != nil {
		t.Fatal(err)
	}
	w := NewWaiter(pol)
	var produced atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if s := w.Stats(); s.PollHits > s.Waits {
				t.Errorf("snapshot with more hits than waits: %+v", s)
				return
			}
		}
	}()
	const goroutines, waits = 4, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bell := &fakeBell{}
			for i := range waits {
				n := 1 + (g+i)%40 // ready at once, after some polls, after sleeping
				if err := w.Wait(readyOnCall(n), bell, time.Time{}); err != nil {
					t.Error(err)
					return
				}
				produced.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	if s := w.Stats(); s.Waits != uint64(produced.Load()) || s.Waits != goroutines*waits {
		t.Errorf("Stats %+v after %d waits", s, produced.Load())
	}
}

// A sleep made outside Wait (after its doorbell refused to arm) is
// reported by Woken: a wait of no polls, not a hit, one event.
func TestWaiterWoken(t *testing.T) {
	p := &recPolicy{t: t, budget: 4, switches: 2}
	w := NewWaiter(p)
	bell := &fakeBell{armErr: errTestGone}
	if err := w.Wait(func() bool { return false }, bell, time.Time{}); !errors.Is(err, errTestGone) {
		t.Fatalf("Wait = %v, want the Arm error", err)
	}
	w.Woken()
	want := []observation{{4, false, 0}, {0, false, 1}}
	if !slices.Equal(p.obs, want) || p.open != 0 {
		t.Errorf("observed %+v (%d open), want %+v", p.obs, p.open, want)
	}
	if s := w.Stats(); s.Waits != 1 || s.Sleeps != 1 || s.PollHits != 0 || s.ModeSwitches != 2 {
		t.Errorf("Stats = %+v, want 1 wait, 1 sleep, no hit, 2 switches", s)
	}
}
