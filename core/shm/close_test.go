package shm

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestPeerCloseFlushes: when the peer's queue pair closes, a SEND waiting
// for a RECV completes StatusRetryExceeded, the WRITE behind it and the
// posted RECVs StatusFlushed, the queue pair is in QPError, and later posts
// flush.
func TestPeerCloseFlushes(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	rb := b.mr.Remote()
	for _, id := range []uint64{10, 11} {
		if _, err := a.qp.PostRecv(&verbs.RecvRequest{ID: id, SGEs: sge(a.mr, 0, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	chain := &verbs.SendRequest{ID: 1, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 8),
		Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key}}
	if _, err := a.qp.PostSend(chain); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Close(); err != nil {
		t.Fatal(err)
	}
	cs := waitCQ(t, a.cq, 4)
	var sends, recvs []verbs.Completion
	for _, c := range cs {
		if c.Op == verbs.OpRecv {
			recvs = append(recvs, c)
		} else {
			sends = append(sends, c)
		}
	}
	if len(sends) != 2 || len(recvs) != 2 {
		t.Fatalf("completions %+v", cs)
	}
	wantStatus(t, sends[0], 1, verbs.OpSend, verbs.StatusRetryExceeded)
	wantStatus(t, sends[1], 2, verbs.OpWrite, verbs.StatusFlushed)
	wantStatus(t, recvs[0], 10, verbs.OpRecv, verbs.StatusFlushed)
	wantStatus(t, recvs[1], 11, verbs.OpRecv, verbs.StatusFlushed)
	if a.qp.State() != verbs.QPError {
		t.Fatalf("state %v", a.qp.State())
	}
	if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 3, Op: verbs.OpSend}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostRecv(&verbs.RecvRequest{ID: 12}); err != nil {
		t.Fatal(err)
	}
	cs = waitCQ(t, a.cq, 2)
	wantStatus(t, cs[0], 3, verbs.OpSend, verbs.StatusFlushed)
	wantStatus(t, cs[1], 12, verbs.OpRecv, verbs.StatusFlushed)
}

// TestPeerSocketGone: the peer vanishing without a word (its side channel
// reaching EOF, as when its process dies) moves the queue pair to QPError.
func TestPeerSocketGone(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	if _, err := a.qp.PostRecv(&verbs.RecvRequest{ID: 1}); err != nil {
		t.Fatal(err)
	}
	// Simulate the death of b's process: its end of the side channel
	// closes, nothing is published in shared memory.
	qb := b.q()
	qb.sqMu.Lock()
	unix.Shutdown(qb.keep, unix.SHUT_RDWR)
	qb.sqMu.Unlock()
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 1, verbs.OpRecv, verbs.StatusFlushed)
	waitFor(t, "QPError", func() bool { return a.qp.State() == verbs.QPError })
}

// TestOwnCloseFlushes: Close completes outstanding work with StatusFlushed.
func TestOwnCloseFlushes(t *testing.T) {
	a, _ := newPair(t, verbs.QPConfig{}, 4096)
	if _, err := a.qp.PostRecv(&verbs.RecvRequest{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 2, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 4)}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.Close(); err != nil {
		t.Fatal(err)
	}
	cs := waitCQ(t, a.cq, 2)
	for _, c := range cs {
		if c.Status != verbs.StatusFlushed {
			t.Errorf("completion %+v, want flushed", c)
		}
	}
	if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 3, Op: verbs.OpWrite}); !isErr(err, verbs.ErrClosed) {
		t.Fatalf("PostSend after Close: %v", err)
	}
}

// TestNoLeaks: a full connection life (regions before and after Connect,
// one-sided and two-sided traffic, Endpoints passed directly and through a
// socket) leaves no descriptor, mapping user or goroutine behind.
func TestNoLeaks(t *testing.T) {
	run := func(viaSocket bool) {
		a, b := newSide(t, verbs.QPConfig{}, 4096), newSide(t, verbs.QPConfig{}, 4096)
		if viaSocket {
			connectViaSocket(t, a, b)
		} else {
			connect(t, a, b)
		}
		extra, err := b.p.RegisterRegion(4096, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 1, SGEs: sge(b.mr, 0, 64)}); err != nil {
			t.Fatal(err)
		}
		chain := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, 64), RemoteKey: extra.Remote().Key,
			Next: &verbs.SendRequest{ID: 2, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 64)}}
		if _, err := a.qp.PostSend(chain); err != nil {
			t.Fatal(err)
		}
		waitCQ(t, a.cq, 1)
		waitCQ(t, b.cq, 1)
		if err := extra.Close(); err != nil {
			t.Fatal(err)
		}
		a.close(t)
		b.close(t)
	}
	run(false) // warm up lazily created runtime descriptors
	fds, gs := countFDs(t), runtime.NumGoroutine()
	for _, viaSocket := range []bool{false, true, false} {
		run(viaSocket)
	}
	if got := countFDs(t); got != fds {
		t.Errorf("%d descriptors open, %d before", got, fds)
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= gs })
}
