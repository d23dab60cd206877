package fdhook

import (
	"testing"

	"golang.org/x/sys/unix"
)

// HighBase follows the soft RLIMIT_NOFILE: half of it, at least 64 and at
// most highMax, so that a process with a large limit (a container's
// 1048576) does not keep its fds where every fork copies a table of tens
// of thousands of entries.
func TestHighBase(t *testing.T) {
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &saved) })
	for _, c := range []struct{ soft, want uint64 }{
		{100, 64}, {256, 128}, {1024, 512}, {2048, highMax}, {20000, highMax}, {1 << 20, highMax},
	} {
		if c.soft > saved.Max {
			t.Logf("soft limit %d is above the hard limit %d here: not tried", c.soft, saved.Max)
			continue
		}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: c.soft, Max: saved.Max}); err != nil {
			t.Fatal(err)
		}
		if got := HighBase(); got != int(c.want) {
			t.Errorf("RLIMIT_NOFILE %d: HighBase %d, want %d", c.soft, got, c.want)
		}
	}
}
