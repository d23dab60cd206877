package shm

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// openFDs returns the descriptors open in this process.
func openFDs(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			out[fd] = true
		}
	}
	return out
}

// TestFDHookSeesEveryDescriptor: with a fdhook.FDHook installed, every
// descriptor the provider holds while two queue pairs are connected (as
// between processes, with regions announced both ways) was reported
// opened, and every one is reported closing before the objects' Close
// returns, so none is left marked.
func TestFDHookSeesEveryDescriptor(t *testing.T) {
	var mu sync.Mutex
	held := map[int]int{} // fd -> times reported opened and not yet closing
	var before map[int]bool
	fdhook.SetFDHook(fdhook.FDHook{
		Opened: func(fd int) { mu.Lock(); held[fd]++; mu.Unlock() },
		Closing: func(fd int) {
			mu.Lock()
			defer mu.Unlock()
			// Goroutines other tests left behind may close what they
			// opened before the hook was installed.
			if held[fd] == 0 && !before[fd] {
				t.Errorf("fd %d closing but never reported opened", fd)
			}
			delete(held, fd)
		},
	})
	defer fdhook.SetFDHook(fdhook.FDHook{})
	mu.Lock()
	before = openFDs(t)
	mu.Unlock()
	a, b := newSide(t, verbs.QPConfig{}, 4096), newSide(t, verbs.QPConfig{}, 4096)
	connectViaSocket(t, a, b)
	late, err := a.p.RegisterRegion(4096, accessAll)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the late region at the peer", func() bool {
		q := b.q()
		q.sqMu.Lock()
		defer q.sqMu.Unlock()
		q.drainAnnouncements()
		return q.remote[late.Remote().Key] != nil
	})
	// A descriptor another goroutine has just received may show in
	// /proc before its report arrives: look twice.
	unreported := func(fds map[int]bool) map[int]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[int]bool{}
		for fd := range fds {
			if !before[fd] && held[fd] == 0 {
				out[fd] = true
			}
		}
		return out
	}
	missing := unreported(openFDs(t))
	if len(missing) > 0 {
		time.Sleep(50 * time.Millisecond)
		missing = unreported(missing)
	}
	for fd := range missing {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			continue // closed since (the listing of /proc/self/fd itself)
		}
		t.Errorf("fd %d (%s) held by the provider was never reported", fd, target)
	}
	if err := late.Close(); err != nil {
		t.Fatal(err)
	}
	a.close(t)
	b.close(t)
	mu.Lock()
	defer mu.Unlock()
	if len(held) != 0 {
		t.Fatalf("descriptors reported opened and never closing: %v", held)
	}
}
