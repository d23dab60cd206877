package shm

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// The doorbell and sliding-window paths: WRITE_WITH_IMM, each consuming a
// RECV the receiver keeps posted. Both sides poll their completion queue
// (yielding in between), one goroutine each.

// immWR is an unsignaled WRITE_WITH_IMM of size bytes from the start of
// from's region to offset off of to's region.
func immWR(from, to *side, off uint64, size uint32, inline bool) *verbs.SendRequest {
	rr := to.mr.Remote()
	wr := &verbs.SendRequest{Op: verbs.OpWriteWithImm, SGEs: sge(from.mr, 0, size),
		RemoteKey: rr.Key, RemoteAddr: rr.At(off)}
	if inline {
		wr.Flags = verbs.SendInline
	}
	return wr
}

// postRecvs posts n receives without SGEs.
func postRecvs(tb testing.TB, s *side, n int) {
	for i := 0; i < n; i++ {
		if _, err := s.qp.PostRecv(&verbs.RecvRequest{ID: uint64(i)}); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkWriteWithImmPingPong: an 8-byte inline WRITE_WITH_IMM answered
// by one from the other goroutine (a doorbell ring and its answer). Each
// side keeps one RECV posted ahead.
func BenchmarkWriteWithImmPingPong(b *testing.B) {
	a, p := newPair(b, verbs.QPConfig{MaxInline: 64}, 1<<16)
	postRecvs(b, a, 2)
	postRecvs(b, p, 2)
	const stop = 0xffffffff
	echoDone := make(chan error, 1)
	go func() {
		out := make([]verbs.Completion, 1)
		wr := immWR(p, a, 64, 8, true)
		recv := &verbs.RecvRequest{ID: 1}
		for {
			if !waitOne(p.cq, out, false) || out[0].Status != verbs.StatusSuccess {
				echoDone <- fmt.Errorf("echo RECV: %+v", out[0])
				return
			}
			if out[0].Imm == stop {
				echoDone <- nil
				return
			}
			if _, err := p.qp.PostRecv(recv); err != nil {
				echoDone <- err
				return
			}
			wr.Imm = out[0].Imm
			if _, err := p.qp.PostSend(wr); err != nil {
				echoDone <- err
				return
			}
		}
	}()
	out := make([]verbs.Completion, 1)
	wr := immWR(a, p, 64, 8, true)
	recv := &verbs.RecvRequest{ID: 1}
	b.ReportAllocs()
	var i uint32
	for b.Loop() {
		i++
		wr.Imm = i
		if _, err := a.qp.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		if !waitOne(a.cq, out, false) || out[0].Status != verbs.StatusSuccess || out[0].Imm != i {
			b.Fatalf("RECV: %+v, want imm %d", out[0], i)
		}
		if _, err := a.qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
	}
	wr.Imm = stop
	if _, err := a.qp.PostSend(wr); err != nil {
		b.Fatal(err)
	}
	if err := <-echoDone; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriteWithImmStream: a window of WRITE_WITH_IMMs of one block
// each into consecutive slots of the receiver's region, as the sliding
// window sends them, the receiver reposting a RECV per block; every 16th
// is signaled so the sender can reap its queue.
func BenchmarkWriteWithImmStream(b *testing.B) {
	for _, size := range []uint32{64, 4 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			const window, slots = 64, 16
			a, p := newPair(b, verbs.QPConfig{MaxSend: window, MaxRecv: window, MaxInline: 64}, slots*int(size))
			postRecvs(b, p, window)
			total := b.N
			sinkDone := make(chan error, 1)
			go func() {
				out := make([]verbs.Completion, 16)
				recv := &verbs.RecvRequest{ID: 1}
				for got := 0; got < total; {
					n, err := p.cq.Poll(out)
					if err != nil {
						sinkDone <- err
						return
					}
					for _, c := range out[:n] {
						if c.Status != verbs.StatusSuccess || c.Op != verbs.OpRecvWithImm {
							sinkDone <- fmt.Errorf("sink: %+v", c)
							return
						}
						if _, err := p.qp.PostRecv(recv); err != nil {
							sinkDone <- err
							return
						}
					}
					got += n
					if n == 0 {
						yield()
					}
				}
				sinkDone <- nil
			}()
			wr := immWR(a, p, 0, size, false)
			out := make([]verbs.Completion, 16)
			outstanding := 0
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < total; i++ {
				for outstanding+16 > window {
					n, err := a.cq.Poll(out)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range out[:n] {
						if c.Status != verbs.StatusSuccess {
							b.Fatalf("send: %+v", c)
						}
						outstanding -= 16
					}
					if n == 0 {
						yield()
					}
				}
				wr.RemoteAddr = p.mr.Remote().At(uint64(i%slots) * uint64(size))
				wr.Flags = 0
				if i%16 == 15 {
					wr.Flags = verbs.SendSignaled
					outstanding += 16
				}
				for {
					_, err := a.qp.PostSend(wr)
					if err == nil {
						break
					}
					if !errors.Is(err, verbs.ErrQueueFull) {
						b.Fatal(err)
					}
					yield() // entries wait for the receiver's acknowledgement
				}
			}
			if err := <-sinkDone; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func yield() { runtime.Gosched() }
