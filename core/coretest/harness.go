package coretest

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Harness names a provider under test.
type Harness struct {
	// Name is the provider's name, for messages ("shm").
	Name string
	// Open opens one Provider. The suite opens one per side and closes it
	// at the end of each case. An error wrapping verbs.ErrNotSupported (no
	// device here) skips the suite with that error as the reason.
	Open func() (verbs.Provider, error)
}

// Environment variables the suite reads.
const (
	// EnvSeed fixes the random seed (decimal); by default each run picks
	// one and logs it.
	EnvSeed = "SDPSHIM_CORETEST_SEED"
	// EnvTimeout bounds each case (a time.Duration, default 60s). It is a
	// hang guard: a case that reaches it fails.
	EnvTimeout = "SDPSHIM_CORETEST_TIMEOUT"
	// envPeer, set by the suite in the peer process, names the case whose
	// side B the peer runs.
	envPeer = "SDPSHIM_CORETEST_PEER"
)

const defaultCaseTimeout = 60 * time.Second

// Run runs every case of the suite against h as subtests, first with both
// sides in this process (two Providers, two goroutines), then with side B
// in a peer process: this test binary re-executed, which needs ServePeer
// to be called from TestMain.
func Run(t *testing.T, h Harness) {
	if os.Getenv(envPeer) != "" {
		t.Fatalf("coretest: running as a peer process but ServePeer was not called: call coretest.ServePeer first thing in TestMain")
	}
	p, err := h.Open()
	if errors.Is(err, verbs.ErrNotSupported) {
		t.Skipf("provider %s: %v", h.Name, err)
	}
	if err != nil {
		t.Fatalf("open provider %s: %v", h.Name, err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close fresh provider %s: %v", h.Name, err)
	}
	seed := suiteSeed(t)
	t.Run("in-process", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { runInProcess(t, h, c, seed) })
		}
	})
	t.Run("cross-process", func(t *testing.T) {
		if !servePeerCalled {
			t.Fatalf("coretest: ServePeer was not called from TestMain; the peer process cannot run")
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { runCrossProcess(t, h, c, seed) })
		}
	})
}

func suiteSeed(t *testing.T) uint64 {
	if v := os.Getenv(EnvSeed); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a decimal number", EnvSeed, v)
		}
		return seed
	}
	seed := rand.Uint64()
	t.Logf("coretest seed %d (set %s to repeat)", seed, EnvSeed)
	return seed
}

// caseDeadline is when a case gives up: the case timeout from now, but no
// later than shortly before the test binary's own -timeout.
func caseDeadline(t *testing.T) time.Time {
	timeout := defaultCaseTimeout
	if v := os.Getenv(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 90s", EnvTimeout, v)
		}
		timeout = d
	}
	deadline := time.Now().Add(timeout)
	if td, ok := t.Deadline(); ok && td.Add(-10*time.Second).Before(deadline) {
		deadline = td.Add(-10 * time.Second)
	}
	return deadline
}

// guardGrace is how long after the case deadline the runner waits for a
// side that is stuck inside a provider call before it reports it and
// moves on.
const guardGrace = 5 * time.Second

func newSide(role string, p verbs.Provider, fd int, deadline time.Time, seed uint64, short bool) *side {
	s := &side{
		role:     role,
		p:        p,
		link:     &link{fd: fd, deadline: deadline},
		deadline: deadline,
		rng:      rand.New(rand.NewPCG(seed, uint64(role[0]))),
		short:    short,
	}
	s.own("provider", p)
	return s
}

func openProvider(t *testing.T, h Harness) verbs.Provider {
	p, err := h.Open()
	if err != nil {
		t.Fatalf("open provider %s: %v", h.Name, err)
	}
	return p
}

// caseSeed gives every case its own seed derived from the suite's.
func caseSeed(seed uint64, name string) uint64 {
	for _, b := range []byte(name) {
		seed = seed*1099511628211 + uint64(b)
	}
	return seed
}

func runInProcess(t *testing.T, h Harness, c testCase, seed uint64) {
	if c.crossOnly {
		t.Skip("needs the peer in a process of its own; runs under cross-process")
	}
	fa, fb, err := newLinkPair()
	if err != nil {
		t.Fatal(err)
	}
	deadline := caseDeadline(t)
	seed = caseSeed(seed, c.name)
	a := newSide("A", openProvider(t, h), fa, deadline, seed, testing.Short())
	b := newSide("B", openProvider(t, h), fb, deadline, seed, testing.Short())
	a.open, b.open = h.Open, h.Open
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.run(c.a) }()
	go func() { doneB <- b.run(c.b) }()
	guard := time.NewTimer(time.Until(deadline) + guardGrace)
	defer guard.Stop()
	for _, w := range []struct {
		s    *side
		done chan error
	}{{a, doneA}, {b, doneB}} {
		select {
		case err := <-w.done:
			for _, l := range w.s.logs {
				t.Logf("side %s: %s", w.s.role, l)
			}
			if err != nil {
				t.Errorf("side %s: %v", w.s.role, err)
			}
		case <-guard.C:
			t.Fatalf("side %s did not return by the case deadline: stuck in a provider call (goroutine left behind)", w.s.role)
		}
	}
}
