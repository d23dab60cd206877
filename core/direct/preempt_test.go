package direct

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// starve makes a wait on a small handle lose the CPU, as a ping-pong
// beside a bulk transfer on too few cores does: the waiting thread and a
// spinning one are pinned to the same CPU, and the wait's yields hand the
// CPU to the spinner. The wait ends unsatisfied (nothing is sent); what
// it leaves is the process's starvation mark (preload/c/direct.c).
func starve(t *testing.T, small *Conn) {
	t.Helper()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	var stop, spinning atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		unix.SchedSetaffinity(0, &one)
		defer unix.SchedSetaffinity(0, &allowed)
		spinning.Store(true)
		for !stop.Load() {
		}
	}()
	for !spinning.Load() {
		runtime.Gosched()
	}
	runtime.LockOSThread()
	unix.SchedSetaffinity(0, &one)
	var b [16]byte
	n, sl, err := small.Recv(b[:], false, true) // polls its budget, yielding every 128 polls
	unix.SchedSetaffinity(0, &allowed)
	runtime.UnlockOSThread()
	stop.Store(true)
	<-done
	if n != 0 || sl == nil || err != nil {
		t.Fatalf("small wait: %d %v %v, want a sleep", n, sl, err)
	}
	small.Woke(sl)
}

// bulk sends total bytes (a multiple of 64 KiB) in 64 KiB blocking sends
// over the pair, with a reader draining it, calling before (when not nil)
// ahead of each send; it checks every byte and returns the sender's
// pauses.
func bulk(t *testing.T, tx, rx *Conn, total int, before func()) uint64 {
	t.Helper()
	msg := make([]byte, 64<<10)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	got := make(chan error, 1)
	go func() {
		buf, want := make([]byte, 64<<10), bytes.Repeat(msg, total/len(msg))
		for off := 0; off < total; {
			n, sl, err := rx.Recv(buf, false, true)
			if sl != nil {
				rx.Woke(sl) // poll again: a test need not sleep
				continue
			}
			if err != nil || n == 0 || !bytes.Equal(buf[:n], want[off:off+n]) {
				got <- err
				return
			}
			off += n
		}
		got <- nil
	}()
	for sent := 0; sent < total; {
		if before != nil {
			before()
		}
		b := msg[sent%len(msg):]
		n, sl, err := tx.Send(b, true)
		if sl != nil {
			tx.Woke(sl)
			continue
		}
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		sent += n
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
	small, _ := pair(t, 8, 4096)
	small.SetPolling(256, 256) // two yields a wait

	time.Sleep(5 * time.Millisecond) // past any earlier test's mark
	tx, rx := pair(t, 16, 16384)
	tx.SetPreempt(true)
	if p := bulk(t, tx, rx, 8<<20, nil); p != 0 {
		t.Errorf("nothing starved: %d pauses, want none", p)
	}

	tx, rx = pair(t, 16, 16384)
	tx.SetPreempt(true)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, small) }); p == 0 {
		t.Error("a small wait lost the CPU before every send: no pause")
	} else {
		t.Logf("starved: %d pauses", p)
	}

	tx, rx = pair(t, 16, 16384)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, small) }); p != 0 {
		t.Errorf("preemption off: %d pauses, want none", p)
	}

	// A connection's own small reads (a server reading small requests and
	// writing large answers) do not hold its own writes back.
	time.Sleep(5 * time.Millisecond) // past the mark the small handle left
	tx, rx = pair(t, 16, 16384)
	tx.SetPreempt(true)
	tx.SetPolling(256, 256)
	if p := bulk(t, tx, rx, 1<<20, func() { starve(t, tx) }); p != 0 {
		t.Errorf("starved by its own reads: %d pauses, want none", p)
	}
}
