package shim

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// forkWorkHost records what the core tells the interposer about forks;
// its fork children run cores (listeners become group listeners).
type forkWorkRecorder struct {
	*fakeHost
	need atomic.Int32 // -1: never told
}

func (r *forkWorkRecorder) ForkWork(need bool) {
	v := int32(0)
	if need {
		v = 1
	}
	r.need.Store(v)
}

func (r *forkWorkRecorder) ChildCores() bool { return true }

// TestForkWork: forks need the core's ForkPrepare exactly while a
// connection is accelerated or a registered listener is not a group
// listener yet; otherwise the interposer forks without entering it.
func TestForkWork(t *testing.T) {
	h := newFakeHost()
	r := &forkWorkRecorder{fakeHost: h}
	r.need.Store(-1)
	p, reason := Init(r, testEnv([]string{"SDPSHIM_RUNDIR=" + t.TempDir() + "/run"}))
	if p == nil {
		t.Fatalf("Init declined: reason %d", reason)
	}
	t.Cleanup(p.Exit)
	want := func(v int32, when string) {
		t.Helper()
		if got := r.need.Load(); got != v {
			t.Fatalf("%s: fork work %d, want %d", when, got, v)
		}
	}
	want(0, "at start")
	lfd, cfd := listenConnect(t, p, h)
	want(1, "a listener registered")
	afd := acceptOne(t, p, h, lfd)
	want(1, "a connection accelerated")
	for _, fd := range []int{cfd, afd} {
		p.Close(fd)
		unix.Close(fd)
	}
	want(1, "the connection closed, the listener still plain")
	p.ForkPrepare(ForkFork) // the listener becomes a group listener
	want(0, "after a fork: a group listener")
	p.Close(lfd)
	unix.Close(lfd)
	want(0, "the listener closed")
	l2, c2 := listenConnect(t, p, h)
	a2 := acceptOne(t, p, h, l2)
	p.Close(l2)
	unix.Close(l2)
	want(1, "a connection accelerated, its listener closed")
	for _, fd := range []int{c2, a2} {
		p.Close(fd)
		unix.Close(fd)
	}
	want(0, "everything closed")
}
