package shim

import (
	"testing"

	"github.com/sdpshim/sdpshim/core/direct"
)

// unsent gives the watcher's bell (0), the sets' (1..), then the poll
// threads' (from FirstPollBell, by slot), each once, in increasing
// number, within the limit.
func TestOwnBellsUnsent(t *testing.T) {
	var b ownBells
	b.setWatcher(100)
	if n := b.add(101); n != 1 {
		t.Fatalf("first set's bell: %d", n)
	}
	if n := b.add(102); n != 2 {
		t.Fatalf("second set's bell: %d", n)
	}
	b.retire(2)
	poll := []int{200, -1, 202}
	fds, mask := b.unsent(0, 16, poll)
	want := uint64(1<<0 | 1<<1 | 1<<direct.FirstPollBell | 1<<(direct.FirstPollBell+2))
	if mask != want || len(fds) != 4 || fds[0] != 100 || fds[1] != 101 || fds[2] != 200 || fds[3] != 202 {
		t.Fatalf("unsent: fds %v mask %#x, want 100 101 200 202 and %#x", fds, mask, want)
	}
	if fds, mask := b.unsent(want, 16, poll); len(fds) != 0 || mask != 0 {
		t.Fatalf("all sent: fds %v mask %#x", fds, mask)
	}
	if fds, mask := b.unsent(1, 2, poll); mask != 1<<1|1<<direct.FirstPollBell || len(fds) != 2 {
		t.Fatalf("limit 2 past the watcher's: fds %v mask %#x", fds, mask)
	}
	for i := 3; i < direct.FirstPollBell; i++ {
		b.add(100 + i)
	}
	if n := b.add(999); n != 0 {
		t.Fatalf("a set's bell past the sets' numbers: %d", n)
	}
}

// A spare bell is numbered like a set's, given with the others, and
// taken by the next set; one at a time, none once numbers ran out.
func TestOwnBellsSpare(t *testing.T) {
	var b ownBells
	if fd, n := b.takeSpare(); fd != -1 || n != 0 {
		t.Fatalf("no spare yet: %d %d", fd, n)
	}
	if !b.addSpare(101) {
		t.Fatal("first spare refused")
	}
	if b.needsSpare() || b.addSpare(102) {
		t.Fatal("a second spare while one waits")
	}
	if fds, mask := b.unsent(0, 16, nil); mask != 1<<1 || len(fds) != 1 || fds[0] != 101 {
		t.Fatalf("spare not given: fds %v mask %#x", fds, mask)
	}
	if fd, n := b.takeSpare(); fd != 101 || n != 1 {
		t.Fatalf("taken: fd %d bell %d, want 101 1", fd, n)
	}
	if fd, n := b.takeSpare(); fd != -1 || n != 0 {
		t.Fatalf("taken twice: %d %d", fd, n)
	}
	if n := b.add(103); n != 2 {
		t.Fatalf("a set's own bell after the spare: %d", n)
	}
	for i := 3; i < direct.FirstPollBell; i++ {
		b.add(100 + i)
	}
	if b.needsSpare() || b.addSpare(999) {
		t.Fatal("a spare past the sets' numbers")
	}
}
