package coretest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The peer process is the test binary itself, started with envPeer naming
// the case and its end of the link as file descriptor peerLinkFD. The
// suite first sends a hello (deadline, seed, short mode); the peer runs the
// case's side B and exits 0, or prints the failure on stderr and exits 1.
// A peer that outlives its deadline exits on its own, and the suite kills
// it when the test ends, so no peer survives a run.

const peerLinkFD = 3

// servePeerCalled records that TestMain called ServePeer, without which
// a peer process would run the whole test binary instead of its side.
var servePeerCalled bool

// ServePeer must be called first thing in TestMain of every package that
// calls Run. In the peer process it runs the requested case's side B and
// exits; in the test process it returns at once.
func ServePeer(h Harness) {
	servePeerCalled = true
	name, ok := os.LookupEnv(envPeer)
	if !ok {
		return
	}
	os.Unsetenv(envPeer)
	os.Exit(servePeer(h, name))
}

func servePeer(h Harness, name string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "coretest peer (%s, side B of %s): %s\n", h.Name, name, fmt.Sprintf(format, args...))
		return 1
	}
	unix.CloseOnExec(peerLinkFD)
	c, ok := caseNamed(name)
	if !ok {
		return fail("no such case")
	}
	hello := &link{fd: peerLinkFD, deadline: time.Now().Add(defaultCaseTimeout)}
	v, err := hello.recvWords(kindHello)
	if err != nil || len(v) != 3 {
		return fail("no hello from the suite: %v %v", v, err)
	}
	deadline := time.Unix(0, int64(v[0]))
	// Exit on our own if side B is stuck past the deadline.
	time.AfterFunc(time.Until(deadline)+guardGrace, func() {
		fmt.Fprintf(os.Stderr, "coretest peer (%s, side B of %s): still running after the case deadline; exiting\n", h.Name, name)
		os.Exit(2)
	})
	p, err := h.Open()
	if err != nil {
		return fail("open provider: %v", err)
	}
	s := newSide("B", p, peerLinkFD, deadline, v[1], v[2] != 0)
	s.open = h.Open
	err = s.run(c.b)
	for _, l := range s.logs {
		fmt.Fprintf(os.Stderr, "side B: %s\n", l)
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

func runCrossProcess(t *testing.T, h Harness, c testCase, seed uint64) {
	fa, fb, err := newLinkPair()
	if err != nil {
		t.Fatal(err)
	}
	peerEnd := os.NewFile(uintptr(fb), "coretest-link")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPeer+"="+c.name, "GORACE="+peerGORACE())
	cmd.ExtraFiles = []*os.File{peerEnd} // becomes fd 3 == peerLinkFD
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	peerEnd.Close()
	if err != nil {
		unix.Close(fa)
		t.Fatalf("start peer process: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	var once sync.Once
	var waitErr error
	reap := func() error {
		once.Do(func() {
			unix.Kill(pid, unix.SIGKILL)
			waitErr = <-exited
		})
		return waitErr
	}
	t.Cleanup(func() { reap() })

	deadline := caseDeadline(t)
	seed = caseSeed(seed, c.name)
	short := uint64(0)
	if testing.Short() {
		short = 1
	}
	a := newSide("A", openProvider(t, h), fa, deadline, seed, testing.Short())
	a.open = h.Open
	a.killPeer = func() {
		a.peerKilled = true
		if err := unix.Kill(pid, unix.SIGKILL); err != nil {
			a.fatalf("kill peer process %d: %v", pid, err)
		}
	}
	if err := a.link.sendWords(kindHello, uint64(deadline.UnixNano()), seed, short); err != nil {
		t.Fatalf("hello to peer process: %v", err)
	}
	doneA := make(chan error, 1)
	go func() { doneA <- a.run(c.a) }()
	guard := time.NewTimer(time.Until(deadline) + guardGrace)
	defer guard.Stop()
	select {
	case err := <-doneA:
		for _, l := range a.logs {
			t.Logf("side A: %s", l)
		}
		if err != nil {
			t.Errorf("side A: %v", err)
		}
	case <-guard.C:
		reap()
		t.Fatalf("side A did not return by the case deadline: stuck in a provider call (goroutine left behind)\npeer output:\n%s", out.String())
	}

	var peerErr error
	select {
	case peerErr = <-exited:
		once.Do(func() { waitErr = peerErr })
	case <-guard.C:
		t.Errorf("peer process (side B) still running after the case deadline; killed")
		peerErr = reap()
	}
	switch {
	case a.peerKilled:
		// Killed by the case itself: its exit status says nothing.
	case peerErr != nil:
		t.Errorf("peer process (side B) failed: %v\n%s", peerErr, out.String())
		return
	}
	if out.Len() > 0 && (t.Failed() || testing.Verbose()) {
		t.Logf("peer process output:\n%s", out.String())
	}
}

// peerGORACE keeps the caller's race detector options and drops its
// default one-second sleep at exit, which would otherwise add a second to
// every cross-process case under -race.
func peerGORACE() string {
	opts := os.Getenv("GORACE")
	if strings.Contains(opts, "atexit_sleep_ms") {
		return opts
	}
	return strings.TrimSpace(opts + " atexit_sleep_ms=0")
}

// lockedBuffer collects the peer's stdout and stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}
