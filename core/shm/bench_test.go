package shm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core"
)

// writePair builds the status-byte hot path: a data WRITE chained with an
// inline WRITE of an 8-byte status word.
func writePair(a, b *side, size uint32) (data, status *core.SendRequest) {
	rb := b.mr.Remote()
	status = &core.SendRequest{ID: 2, Op: core.OpWrite, Flags: core.SendInline,
		SGEs: sge(a.mr, 1<<15, 8), RemoteKey: rb.Key, RemoteAddr: rb.At(1 << 15)}
	data = &core.SendRequest{ID: 1, Op: core.OpWrite, SGEs: sge(a.mr, 0, size),
		RemoteKey: rb.Key, RemoteAddr: rb.At(0), Next: status}
	return data, status
}

// TestHotPathDoesNotAllocate: posting WRITE + inline WRITE allocates
// nothing, signaled or not.
func TestHotPathDoesNotAllocate(t *testing.T) {
	a, b := newPair(t, core.QPConfig{MaxInline: 64}, 1<<16)
	data, status := writePair(a, b, 256)
	out := make([]core.Completion, 1)
	allocs := testing.AllocsPerRun(200, func() {
		status.Flags ^= core.SendSignaled
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
			a, p := newPair(bb, core.QPConfig{MaxInline: 64}, 1<<16)
			data, status := writePair(a, p, size)
			out := make([]core.Completion, 1)
			bb.ReportAllocs()
			bb.SetBytes(int64(size) + 8)
			i := 0
			for bb.Loop() {
				i++
				signal := i%64 == 0
				status.Flags = core.SendInline
				if signal {
					status.Flags |= core.SendSignaled
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
func waitOne(cq core.CompletionQueue, out []core.Completion, event bool) bool {
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
	a, p := newPair(b, core.QPConfig{}, 4096)
	const stop = 1
	echoDone := make(chan error, 1)
	go func() {
		out := make([]core.Completion, 1)
		recv := &core.RecvRequest{ID: 1, SGEs: sge(p.mr, 0, 64)}
		send := &core.SendRequest{ID: 2, Op: core.OpSend, SGEs: sge(p.mr, 0, 64)}
		for {
			if _, err := p.qp.PostRecv(recv); err != nil {
				echoDone <- err
				return
			}
			if !waitOne(p.cq, out, event) || out[0].Status != core.StatusSuccess {
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
	out := make([]core.Completion, 1)
	recv := &core.RecvRequest{ID: 3, SGEs: sge(a.mr, 0, 64)}
	send := &core.SendRequest{ID: 4, Op: core.OpSend, SGEs: sge(a.mr, 0, 64)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		if _, err := a.qp.PostSend(send); err != nil {
			b.Fatal(err)
		}
		if !waitOne(a.cq, out, event) || out[0].Status != core.StatusSuccess {
			b.Fatalf("RECV: %+v", out[0])
		}
	}
	bye := &core.SendRequest{ID: 5, Op: core.OpSend, HasImm: true, Imm: stop}
	if _, err := a.qp.PostSend(bye); err != nil {
		b.Fatal(err)
	}
	if err := <-echoDone; err != nil {
		b.Fatal(err)
	}
}
