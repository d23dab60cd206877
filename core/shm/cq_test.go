package shm

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// readable reports whether fd is readable right now (no waiting).
func readable(t *testing.T, fd int) bool {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestNotifyFDWithEpoll: an armed CQ wakes an epoll set watching NotifyFD
// when a completion arrives; AckNotify makes it quiet again; Arm with a
// completion already queued fires at once; an unarmed CQ stays quiet.
func TestNotifyFDWithEpoll(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	rb := b.mr.Remote()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	fd := a.cq.NotifyFD()
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		t.Fatal(err)
	}
	write := func(id uint64) {
		wr := &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key}
		if _, err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	// Unarmed: a completion does not make the fd readable.
	write(1)
	if readable(t, fd) {
		t.Fatal("NotifyFD readable without Arm")
	}
	// Armed with a completion queued: readable at once.
	if err := a.cq.Arm(); err != nil {
		t.Fatal(err)
	}
	var evs [1]unix.EpollEvent
	if n, err := unix.EpollWait(ep, evs[:], int(waitLimit.Milliseconds())); n != 1 || err != nil {
		t.Fatalf("epoll_wait after Arm with a queued completion: %d, %v", n, err)
	}
	if err := a.cq.AckNotify(); err != nil {
		t.Fatal(err)
	}
	if readable(t, fd) {
		t.Fatal("NotifyFD readable after AckNotify")
	}
	if err := a.cq.AckNotify(); err != nil { // nothing pending: no block, no error
		t.Fatal(err)
	}
	waitCQ(t, a.cq, 1)
	// Arm, poll (empty), then a completion from another goroutine wakes epoll.
	if err := a.cq.Arm(); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.cq.Poll(make([]verbs.Completion, 1)); n != 0 {
		t.Fatal("unexpected completion")
	}
	go func() {
		wr := &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key}
		if _, err := a.qp.PostSend(wr); err != nil {
			t.Error(err)
		}
	}()
	if n, err := unix.EpollWait(ep, evs[:], int(waitLimit.Milliseconds())); n != 1 || err != nil {
		t.Fatalf("epoll_wait for a completion after Arm: %d, %v", n, err)
	}
	a.cq.AckNotify()
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 2, verbs.OpWrite, verbs.StatusSuccess)
}

func TestCQOverrun(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	rb := b.mr.Remote()
	small, err := a.p.CreateCQ(2)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := a.p.CreateQP(verbs.QPConfig{SendCQ: small, RecvCQ: a.cq})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.p.CreateQP(verbs.QPConfig{SendCQ: b.cq, RecvCQ: b.cq})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		qp.Close()
		qb.Close()
		if err := small.Close(); err != nil {
			t.Error(err)
		}
	}()
	connect(t, &side{qp: qp}, &side{qp: qb})
	for i := uint64(1); i <= 3; i++ {
		wr := &verbs.SendRequest{ID: i, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key}
		if _, err := qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
	}
	if err := small.Close(); !isErr(err, verbs.ErrBusy) {
		t.Fatalf("closing a CQ in use: %v, want ErrBusy", err)
	}
	out := make([]verbs.Completion, 4)
	n, err := small.Poll(out)
	if !isErr(err, verbs.ErrCQOverrun) || n != 2 {
		t.Fatalf("Poll after overrun: %d, %v", n, err)
	}
	waitFor(t, "QPError after overrun", func() bool { return qp.State() == verbs.QPError })
	if a.qp.State() != verbs.QPReady {
		t.Fatalf("a queue pair on another CQ moved to %v", a.qp.State())
	}
}

func TestCloseRules(t *testing.T) {
	s := newSide(t, verbs.QPConfig{}, 4096)
	if err := s.p.Close(); !isErr(err, verbs.ErrBusy) {
		t.Fatalf("provider close with live objects: %v", err)
	}
	if err := s.cq.Close(); !isErr(err, verbs.ErrBusy) {
		t.Fatalf("CQ close with a QP: %v", err)
	}
	if _, err := s.qp.PostSend(&verbs.SendRequest{Op: verbs.OpWrite}); !isErr(err, verbs.ErrNotReady) {
		t.Fatalf("PostSend in init: %v", err)
	}
	// RECVs are accepted before Connect and flushed by Close.
	if _, err := s.qp.PostRecv(&verbs.RecvRequest{ID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.qp.Close(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, waitCQ(t, s.cq, 1)[0], 3, verbs.OpRecv, verbs.StatusFlushed)
	if _, err := s.qp.PostRecv(&verbs.RecvRequest{ID: 4}); !isErr(err, verbs.ErrClosed) {
		t.Fatalf("PostRecv after Close: %v", err)
	}
	if err := s.qp.Close(); !isErr(err, verbs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	s.close(t)
	if _, err := s.p.RegisterRegion(1, 0); !isErr(err, verbs.ErrClosed) {
		t.Fatalf("RegisterRegion on a closed provider: %v", err)
	}
}
