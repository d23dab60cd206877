package shim

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
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

// A peer process's record outlives its last connection (its bells stay,
// and so does what this process gave), goes once its process is gone,
// and past maxIdlePeers idle ones the longest idle goes first.
func TestPeerBellsIdle(t *testing.T) {
	p, _ := newProcess(t)
	// A bell here is a pipe's read end (its inode names it: a number
	// closed may be taken again by the next bell); its write end stays.
	type held struct{ fd, ino int }
	bell := func(pb *peerBells) held {
		t.Helper()
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[1]) })
		var st unix.Stat_t
		unix.Fstat(fds[0], &st)
		if !pb.table.Set(1, fds[0]) {
			t.Fatal("bell not kept")
		}
		return held{fds[0], int(st.Ino)}
	}
	open := func(h held) bool {
		var st unix.Stat_t
		return unix.Fstat(h.fd, &st) == nil && int(st.Ino) == h.ino
	}

	self := procID{pid: os.Getpid(), start: rendezvous.StartTime(os.Getpid())}
	pb := p.peerBellsFor(self)
	fd := bell(pb)
	p.gaveBells(pb, 1<<1)
	p.unrefBells(pb)
	again := p.peerBellsFor(self)
	if again != pb || !again.table.Has(1) || !open(fd) {
		t.Fatal("a live peer's record did not outlive its last connection")
	}
	if _, mask := p.bellsToGive(again, 16); mask&(1<<1) != 0 {
		t.Fatal("bell 1 given again to a peer that has it")
	}
	p.unrefBells(again)
	p.dropGonePeers()
	if !open(fd) {
		t.Fatal("a live peer's bells closed by the release")
	}

	// A process gone: its record goes with its last connection.
	gone := procID{pid: 1 << 22, start: 12345} // above pid_max's default
	g := p.peerBellsFor(gone)
	gfd := bell(g)
	p.unrefBells(g)
	if open(gfd) {
		t.Fatal("a gone peer's bell still open after its last connection")
	}
	if _, ok := p.knownPeer(gone.pid); ok {
		t.Fatal("a gone peer still known")
	}

	// Past maxIdlePeers idle records of running processes, the longest
	// idle goes; the others go at the release once their processes are.
	var fds []held
	var kids []*exec.Cmd
	for i := 0; i < maxIdlePeers; i++ { // with the first one's, one idle too many
		kid := exec.Command("sleep", "60")
		if err := kid.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, kid)
		t.Cleanup(func() { kid.Process.Kill(); kid.Wait() })
		id := procID{pid: kid.Process.Pid, start: rendezvous.StartTime(kid.Process.Pid)}
		r := p.peerBellsFor(id)
		fds = append(fds, bell(r))
		p.unrefBells(r)
	}
	if open(fd) {
		t.Fatal("the longest idle record kept past maxIdlePeers")
	}
	for _, f := range fds {
		if !open(f) {
			t.Fatal("a record idle for less time went first")
		}
	}
	for _, kid := range kids {
		kid.Process.Kill()
		kid.Wait()
	}
	p.dropGonePeers()
	for _, f := range fds {
		if open(f) {
			t.Fatal("a gone peer's bell still open after the release")
		}
	}
}

// The peer's word on what it holds (an offer's or answer's held mask)
// replaces what this process noted giving: a peer that dropped its
// record while this one kept it is given the bells again.
func TestPeerHoldsHeals(t *testing.T) {
	p, _ := newProcess(t)
	pb := p.peerBellsFor(procID{pid: os.Getpid(), start: rendezvous.StartTime(os.Getpid())})
	defer p.unrefBells(pb)
	_, all := p.bellsToGive(pb, 16)
	if all == 0 {
		t.Fatal("no bell to give")
	}
	p.gaveBells(pb, all)
	if _, mask := p.bellsToGive(pb, 16); mask != 0 {
		t.Fatalf("given again while the peer holds them: %#x", mask)
	}
	p.peerHolds(pb, 0) // the peer says it holds none
	if _, mask := p.bellsToGive(pb, 16); mask != all {
		t.Fatalf("after the peer said it holds none: %#x given, want %#x", mask, all)
	}
	if heldBells(pb) != 0 {
		t.Fatal("bells held of a peer that gave none")
	}
}
