package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// Wakeups of threads asleep in epoll_wait and poll over accelerated
// connections (testdata/sem_wake.c): the ae pattern of deleting and
// re-adding a socket around every request, a sleeper and a writer with
// delays around the sleeper's last check, two sleepers in one set, a set
// nested in another and a set polled. The shim writes a set's eventfds
// only while a thread is armed for a kernel sleep (shim/epoll.go), so a
// lost wakeup shows here as a timeout line in the transcript, which must
// equal the kernel's.
func TestWakeups(t *testing.T) {
	a := build(t)
	t.Parallel()
	bin := semBuild(t, "sem_wake")
	kernel, _, _ := semRun(t, a, bin, side{})
	log := filepath.Join(t.TempDir(), "shim.log")
	shimmed, pairs, _ := semRun(t, a, bin, side{shim: true, log: log})
	if d := transcriptDiff(kernel, shimmed); d != "" {
		t.Errorf("transcripts differ (kernel TCP, then shim):\n%s", d)
	}
	if n := strings.Count(readLog(t, log), "connected accelerated"); n != pairs || pairs == 0 {
		t.Errorf("%d of %d connections accelerated under the shim", n, pairs)
	}
}
