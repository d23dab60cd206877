package rendezvous

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// helperEnv selects a helper role when the test binary is re-executed as
// a peer process (see helper_test.go).
const helperEnv = "SDPSHIM_RENDEZVOUS_HELPER"

// TestMain runs helper roles, and otherwise the tests with a file
// descriptor leak check around them.
func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role))
	}
	// Let the runtime and os/exec open what they keep for the process
	// (netpoll) before the baseline is taken.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	time.Sleep(time.Millisecond)
	before := openFDs()
	code := m.Run()
	if code == 0 {
		if extra := leakedFDs(before); len(extra) > 0 {
			fmt.Fprintf(os.Stderr, "file descriptors leaked by the tests: %v\n", extra)
			code = 1
		}
	}
	os.Exit(code)
}

// openFDs returns the open descriptor numbers and what they point to.
func openFDs() map[int]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	fds := map[int]string{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds[fd] = target
	}
	return fds
}

// leakedFDs lists descriptors open now that were not in before, ignoring
// the one ReadDir itself used.
func leakedFDs(before map[int]string) []string {
	var extra []string
	for fd, target := range openFDs() {
		if _, ok := before[fd]; !ok && target != "" && !isSelfFDDir(target) {
			extra = append(extra, fmt.Sprintf("%d -> %s", fd, target))
		}
	}
	slices.Sort(extra)
	return extra
}

func isSelfFDDir(target string) bool {
	return target == fmt.Sprintf("/proc/%d/fd", os.Getpid())
}

// checkNoLeak fails t if descriptors opened during the test remain open
// when it ends (after the cleanups registered later have run).
func checkNoLeak(t *testing.T) {
	t.Helper()
	before := openFDs()
	t.Cleanup(func() {
		if extra := leakedFDs(before); len(extra) > 0 {
			t.Errorf("leaked file descriptors: %v", extra)
		}
	})
}
