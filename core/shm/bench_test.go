package shm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// writePair builds the status-byte hot path: a data WRITE chained with an
// inline WRITE of an 8-byte status word.
func writePair(a, b *side, size uint32) (data, status *verbs.SendRequest) {
	rb := b.mr.Remote()
	status = &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendInline,
		SGEs: sge(a.mr, 1<<15, 8), RemoteKey: rb.Key, RemoteAddr: rb.At(1 << 15)}
	data = &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, size),
		RemoteKey: rb.Key, RemoteAddr: rb.At(0), Next: status}
	return data, status
}

// TestHotPathDoesNotAllocate: posting WRITE + inline WRITE allocates
// nothing, signaled or not.
func TestHotPathDoesNotAllocate(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{MaxInline: 64}, 1<<16)
	data, status := writePair(a, b, 256)
	out := make([]verbs.Completion, 1)
	allocs := testing.AllocsPerRun(200, func() {
		status.Flags ^= verbs.SendSignaled
		if _, err := a.qp.PostSend(data); err != nil {
			t.Fatal(err)
		}
		a.cq.Poll(out)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per WRITE + inline WRITE", allocs)
	}
}

// BenchmarkWriteInlinePair posts a data WRITE chained with an inline status
// WRITE, signaling every 64th pair, as the status-byte channel does.
func BenchmarkWriteInlinePair(b *testing.B) {
	for _, size := range []uint32{64, 256, 4096} {
		b.Run(fmt.Sprintf("%dB", size), func(bb *testing.B) {
			a, p := newPair(bb, verbs.QPConfig{MaxInline: 64}, 1<<16)
			data, status := writePair(a, p, size)
			out := make([]verbs.Completion, 1)
			bb.ReportAllocs()
			bb.SetBytes(int64(size) + 8)
			i := 0
			for bb.Loop() {
				i++
				signal := i%64 == 0
				status.Flags = verbs.SendInline
				if signal {
					status.Flags |= verbs.SendSignaled
				}
				if _, err := a.qp.PostSend(data); err != nil {
					bb.Fatal(err)
				}
				if signal {
					if n, err := a.cq.Poll(out); n != 1 || err != nil {
						bb.Fatalf("poll: %d %v", n, err)
					}
				}
			}
		})
	}
}

// waitOne returns one completion of cq. In event mode it sleeps on the
// notification fd (the worst case for latency); otherwise it polls,
// yielding the processor between polls. ok is false after waitLimit.
func waitOne(cq verbs.CompletionQueue, out []verbs.Completion, event bool) bool {
	deadline := time.Now().Add(waitLimit)
	for {
		if n, err := cq.Poll(out[:1]); n == 1 || err != nil {
			return err == nil
		}
		if time.Now().After(deadline) {
			return false
		}
		if !event {
			runtime.Gosched()
			continue
		}
		cq.Arm()
		if n, err := cq.Poll(out[:1]); n == 1 || err != nil {
			return err == nil
		}
		pfd := []unix.PollFd{{Fd: int32(cq.NotifyFD()), Events: unix.POLLIN}}
		unix.Poll(pfd, 100)
		cq.AckNotify()
	}
}

// BenchmarkSendRecvRoundTrip measures a 64-byte SEND answered by a 64-byte
// SEND, both applications waiting on their completion channel (event) or
// polling their CQ (poll).
func BenchmarkSendRecvRoundTrip(b *testing.B) {
	b.Run("event", func(b *testing.B) { roundTrips(b, true) })
	b.Run("poll", func(b *testing.B) { roundTrips(b, false) })
}

func roundTrips(b *testing.B, event bool) {
	a, p := newPair(b, verbs.QPConfig{}, 4096)
	const stop = 1
	echoDone := make(chan error, 1)
	go func() {
		out := make([]verbs.Completion, 1)
		recv := &verbs.RecvRequest{ID: 1, SGEs: sge(p.mr, 0, 64)}
		send := &verbs.SendRequest{ID: 2, Op: verbs.OpSend, SGEs: sge(p.mr, 0, 64)}
		for {
			if _, err := p.qp.PostRecv(recv); err != nil {
				echoDone <- err
				return
			}
			if !waitOne(p.cq, out, event) || out[0].Status != verbs.StatusSuccess {
				echoDone <- fmt.Errorf("echo RECV: %+v", out[0])
				return
			}
			if out[0].HasImm && out[0].Imm == stop {
				echoDone <- nil
				return
			}
			if _, err := p.qp.PostSend(send); err != nil {
				echoDone <- err
				return
			}
		}
	}()
	out := make([]verbs.Completion, 1)
	recv := &verbs.RecvRequest{ID: 3, SGEs: sge(a.mr, 0, 64)}
	send := &verbs.SendRequest{ID: 4, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 64)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		if _, err := a.qp.PostSend(send); err != nil {
			b.Fatal(err)
		}
		if !waitOne(a.cq, out, event) || out[0].Status != verbs.StatusSuccess {
			b.Fatalf("RECV: %+v", out[0])
		}
	}
	bye := &verbs.SendRequest{ID: 5, Op: verbs.OpSend, HasImm: true, Imm: stop}
	if _, err := a.qp.PostSend(bye); err != nil {
		b.Fatal(err)
	}
	if err := <-echoDone; err != nil {
		b.Fatal(err)
	}
}
