package shm

import (
	"runtime"
	"sync"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestConcurrentPosters: several goroutines post SENDs and WRITEs on one
// queue pair while the receiver keeps RECVs posted; every request
// completes successfully exactly once.
func TestConcurrentPosters(t *testing.T) {
	const posters, each = 3, 300
	a, b := newPair(t, verbs.QPConfig{MaxSend: 32, MaxRecv: 64}, 1<<16)
	rb := b.mr.Remote()
	var wg sync.WaitGroup
	for g := 0; g < posters; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := uint64(g*each + i)
				wr := &verbs.SendRequest{ID: id, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 32)}
				if i%2 == 1 {
					wr = &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
						SGEs: sge(a.mr, 0, 32), RemoteKey: rb.Key, RemoteAddr: rb.At(uint64(g) * 64)}
				}
				for {
					_, err := a.qp.PostSend(wr)
					if err == nil {
						break
					}
					if !isErr(err, verbs.ErrQueueFull) {
						t.Errorf("post: %v", err)
						return
					}
					runtime.Gosched()
				}
			}
		}()
	}
	sends := posters * ((each + 1) / 2)
	go func() {
		for i := 0; i < sends; i++ {
			for {
				_, err := b.qp.PostRecv(&verbs.RecvRequest{ID: uint64(i), SGEs: sge(b.mr, 4096, 64)})
				if err == nil {
					break
				}
				if !isErr(err, verbs.ErrQueueFull) {
					t.Errorf("post recv: %v", err)
					return
				}
				runtime.Gosched()
			}
		}
	}()
	seen := make(map[uint64]bool)
	for _, c := range waitCQ(t, a.cq, posters*each) {
		if c.Status != verbs.StatusSuccess || seen[c.ID] {
			t.Fatalf("completion %+v (seen %v)", c, seen[c.ID])
		}
		seen[c.ID] = true
	}
	for _, c := range waitCQ(t, b.cq, sends) {
		if c.Status != verbs.StatusSuccess || c.ByteLen != 32 {
			t.Fatalf("receive %+v", c)
		}
	}
	wg.Wait()
}

// TestCloseUnderTraffic closes regions and queue pairs while other
// goroutines post to them: requests succeed, fail or flush, posts return
// ErrClosed at the end, and nothing crashes or hangs.
func TestCloseUnderTraffic(t *testing.T) {
	for round := 0; round < 5; round++ {
		a, b := newSide(t, verbs.QPConfig{}, 1<<16), newSide(t, verbs.QPConfig{}, 1<<16)
		connect(t, a, b)
		target, err := b.p.RegisterRegion(1<<16, verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		if err != nil {
			t.Fatal(err)
		}
		rt := target.Remote()
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make([]verbs.Completion, 16)
				for i := 0; ; i++ {
					op := verbs.OpWrite
					if i%3 == 0 {
						op = verbs.OpRead
					}
					wr := &verbs.SendRequest{ID: uint64(i), Op: op, Flags: verbs.SendSignaled,
						SGEs: sge(a.mr, uint64(g)*8192, 8192), RemoteKey: rt.Key, RemoteAddr: rt.At(uint64(i%4) * 8192)}
					if i%5 == 0 {
						wr = &verbs.SendRequest{ID: uint64(i), Op: verbs.OpSend, SGEs: sge(a.mr, 0, 64)}
					}
					if _, err := a.qp.PostSend(wr); err != nil {
						if !isErr(err, verbs.ErrClosed) && !isErr(err, verbs.ErrQueueFull) {
							t.Errorf("post: %v", err)
						}
						if isErr(err, verbs.ErrClosed) {
							return
						}
					}
					a.cq.Poll(out)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: uint64(i), SGEs: sge(b.mr, 0, 64)}); isErr(err, verbs.ErrClosed) {
					return
				}
				b.cq.Poll(make([]verbs.Completion, 16))
			}
		}()
		if err := target.Close(); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			b.qp.Close()
			a.qp.Close()
		} else {
			a.qp.Close()
			b.qp.Close()
		}
		wg.Wait()
		a.close(t)
		b.close(t)
	}
}
