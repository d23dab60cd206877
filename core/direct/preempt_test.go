package direct

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/internal/cpupin"
)

// spinner keeps one CPU busy for the rest of the test: a shell loop
// pinned to it (a process, so that no goroutine holds a P while it
// spins). It returns that CPU.
func spinner(t *testing.T) cpupin.Set {
	t.Helper()
	cpu, err := cpupin.First()
	if err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skipf("no shell to spin: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &cpu.One); err != nil {
		t.Skipf("cannot pin a process to a CPU here: %v", err)
	}
	return cpu
}

// starve makes a receive on the small handle find its message late after
// its wait lost the CPU, as a ping-pong beside a bulk transfer on too few
// cores does: the waiting thread is pinned to the spinner's CPU, its
// yields hand the CPU to the spinner, and peer sends the 16-byte message
// a millisecond later. What it leaves is the process's starvation mark
// (preload/c/direct.c), from the second call on a handle (a handle is
// small after two small receives).
func starve(t *testing.T, cpu cpupin.Set, small, peer *Conn) {
	t.Helper()
	go func() {
		time.Sleep(time.Millisecond)
		peer.Send(make([]byte, 16), false)
	}()
	if err := cpu.Pin(); err != nil {
		cpu.Unpin()
		t.Fatal(err)
	}
	var b [16]byte
	n, sl, err := small.Recv(b[:], false, true) // polls, yielding every 128 polls, until the message comes
	cpu.Unpin()
	if sl != nil {
		small.Woke(sl)
		n, _, err = small.Recv(b[:], false, false)
	}
	if n != 16 || err != nil {
		t.Fatalf("small receive: %d %v, want the 16-byte message", n, err)
	}
}

// bulk sends total bytes in 64 KiB blocking sends over the pair, with a
// reader draining it, calling before (when not nil) ahead of each send;
// it checks every byte and returns the sender's pauses.
func bulk(t *testing.T, tx, rx *Conn, total int, before func()) uint64 {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- receive(rx, total) }()
	if err := send(tx, total, before); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the reader did not get the bytes sent: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader did not finish")
	}
	return tx.Stats().Pauses
}

// Preemption on the direct path: a blocking send of a block or more
// pauses at its scheduling point while a small wait of the process lost
// the CPU lately, and only then (work-conserving), and only with
// preemption on; every byte arrives in each case.
func TestPreemptPauses(t *testing.T) {
	small, smallPeer := pair(t, 8, 4096)
	small.SetPolling(1<<20, 1<<20) // polls until the message comes

	time.Sleep(60 * time.Millisecond) // past any earlier test's mark
	tx, rx := pair(t, 16, 16384)
	tx.SetPreempt(true)
	if p := bulk(t, tx, rx, 8<<20, nil); p != 0 {
		t.Errorf("nothing starved: %d pauses, want none", p)
	}

	cpu := spinner(t)
	tx, rx = pair(t, 16, 16384)
	tx.SetPreempt(true)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, cpu, small, smallPeer) }); p == 0 {
		t.Error("a small wait lost the CPU before every send: no pause")
	} else {
		t.Logf("starved: %d pauses", p)
	}

	tx, rx = pair(t, 16, 16384)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, cpu, small, smallPeer) }); p != 0 {
		t.Errorf("preemption off: %d pauses, want none", p)
	}

	// A connection's own small reads (a server reading small requests and
	// writing large answers) do not hold its own writes back.
	time.Sleep(60 * time.Millisecond) // past the mark the small handle left
	tx, rx = pair(t, 16, 16384)
	tx.SetPreempt(true)
	tx.SetPolling(1<<20, 1<<20)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, cpu, tx, rx) }); p != 0 {
		t.Errorf("starved by its own reads: %d pauses, want none", p)
	}
	// The same reads do hold another connection's writes back.
	other, otherRx := pair(t, 16, 16384)
	other.SetPreempt(true)
	if p := bulk(t, other, otherRx, 1<<20, func() { starve(t, cpu, tx, rx) }); p == 0 {
		t.Error("starved by another connection's reads: no pause")
	}
}

// The Go core's waits judge a lost yield as the protocol's do.
func TestYieldRanOther(t *testing.T) {
	if yieldRanOther != wait.YieldRanOther {
		t.Errorf("a yield that ran another thread: %v in C, %v in core/wait", yieldRanOther, wait.YieldRanOther)
	}
}

// Preemption between processes (preload/c/tenant.c, "The starved mark"):
// a small message of this process that was late goes onto the board as
// this process's mark; another process's fresh mark on the board pauses
// this process's bulk sends as this process's own would, while this
// process's own mark on the board, an old one and one from the future do
// not. Every byte arrives in each case.
func TestPreemptOtherProcess(t *testing.T) {
	fd, _ := newBoard(t)
	small, smallPeer := pair(t, 8, 4096)
	small.SetPolling(1<<20, 1<<20) // polls until the message comes
	small.SetBoard(fd)
	cpu := spinner(t)
	quiet()
	before := rendezvous.BoardNow()
	starve(t, cpu, small, smallPeer)
	starve(t, cpu, small, smallPeer) // a handle is small from its second small receive
	b, err := rendezvous.ReadBoard(fd)
	if err != nil || b.StarvedPID != os.Getpid() || b.StarvedAt < before || b.StarvedAt > rendezvous.BoardNow() {
		t.Fatalf("after a late small message: the board's mark is pid %d at %v (%v), want this process's (%d) since %v",
			b.StarvedPID, b.StarvedAt, err, os.Getpid(), before)
	}

	other := os.Getpid() + 1 // not this process: the board's pids are only compared
	for _, c := range []struct {
		what  string
		pid   int
		at    func() time.Duration
		pause bool
	}{
		{"another process's fresh mark", other, rendezvous.BoardNow, true},
		{"this process's own mark", os.Getpid(), rendezvous.BoardNow, false},
		{"another process's mark of 60 ms ago", other, func() time.Duration { return rendezvous.BoardNow() - 60*time.Millisecond }, false},
		{"another process's mark a second ahead", other, func() time.Duration { return rendezvous.BoardNow() + time.Second }, false},
	} {
		quiet() // this process's own mark, and the gate's last look, are old
		tx, rx := pair(t, 16, 16384)
		tx.SetPreempt(true)
		tx.SetBoard(fd)
		mark := func() {
			if err := rendezvous.WriteStarved(fd, c.pid, c.at()); err != nil {
				t.Fatal(err)
			}
		}
		if p := bulk(t, tx, rx, 4<<20, mark); (p > 0) != c.pause {
			t.Errorf("%s: %d pauses, want pauses %v", c.what, p, c.pause)
		} else {
			t.Logf("%s: %d pauses", c.what, p)
		}
	}
}

// A sender outside a handle (the shared channel's stream, Preempt): its
// reader marks the process only when small, from its second small
// receive on, as a handle's does, and that mark pauses another sender's
// bulk writes, not its own.
func TestPreemptSender(t *testing.T) {
	const block = 16000
	quiet() // no mark of an earlier test
	var reader, other Preempt
	if reader.Late(-1, block) {
		t.Error("no receive yet: marked")
	}
	reader.Receive(16)
	if reader.Late(-1, block) {
		t.Error("one small receive: marked")
	}
	reader.Receive(1 << 20)
	reader.Receive(16)
	if reader.Late(-1, block) {
		t.Error("a large receive, then a small one: marked")
	}
	if other.Point(-1) {
		t.Error("nobody starved: a scheduling point timed its write")
	}
	reader.Receive(16)
	if !reader.Late(-1, block) {
		t.Fatal("two small receives and a late wait: no mark")
	}
	if reader.Point(-1) {
		t.Error("its own reader's mark: the sender's scheduling point timed its write")
	}
	if !other.Point(-1) {
		t.Error("another sender's mark: the scheduling point did not time the write")
	}
	other.Copied(100*time.Microsecond, 1<<20)
	other.Point(-1)
	if other.Pauses() != 1 {
		t.Errorf("after a timed copy of 100 us: %d pauses, want one", other.Pauses())
	}
}
