package shm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestWriteThenInlineStatusOrdering drives the status-byte pattern: a data
// WRITE chained with an inline WRITE of a status word. A reader polling
// the status word must find data at least as new as the status says, and
// never a torn status.
func TestWriteThenInlineStatusOrdering(t *testing.T) {
	const words = 512 // data block of 4 KiB
	const rounds = 3000
	a, b := newPair(t, verbs.QPConfig{MaxInline: 64}, 1<<16)
	rb := b.mr.Remote()
	statusOff := uint64(words * 8)
	src := a.mr.Bytes()

	done := make(chan error, 1)
	go func() {
		dst := b.mr.Bytes()
		status := sharedmem.Uint64At(dst, int(statusOff))
		var last uint64
		for last < rounds {
			s := status.Load()
			if s < last || s > rounds {
				done <- errorf("status went from %d to %d", last, s)
				return
			}
			for i := 0; i < words; i++ {
				if w := sharedmem.Uint64At(dst, i*8).Load(); w < s {
					done <- errorf("status %d visible before data (word %d = %d)", s, i, w)
					return
				}
			}
			last = s
		}
		done <- nil
	}()

	for i := uint64(1); i <= rounds; i++ {
		for w := 0; w < words; w++ {
			binary.LittleEndian.PutUint64(src[w*8:], i)
		}
		binary.LittleEndian.PutUint64(src[statusOff+8:], i)
		flags := verbs.SendInline
		if i%64 == 0 || i == rounds {
			flags |= verbs.SendSignaled
		}
		status := &verbs.SendRequest{ID: i, Op: verbs.OpWrite, Flags: flags,
			SGEs: sge(a.mr, statusOff+8, 8), RemoteKey: rb.Key, RemoteAddr: rb.At(statusOff)}
		data := &verbs.SendRequest{ID: i, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, words*8),
			RemoteKey: rb.Key, RemoteAddr: rb.At(0), Next: status}
		if bad, err := a.qp.PostSend(data); err != nil {
			t.Fatalf("post %d: %v (bad %v)", i, err, bad.ID)
		}
		if flags&verbs.SendSignaled != 0 {
			c := waitCQ(t, a.cq, 1)
			wantStatus(t, c[0], i, verbs.OpWrite, verbs.StatusSuccess)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 8192)
	rb := b.mr.Remote()
	copy(b.mr.Bytes()[100:], "hello, remote memory")
	binary.LittleEndian.PutUint64(b.mr.Bytes()[4096:], 0x1122334455667788)
	rd := &verbs.SendRequest{ID: 1, Op: verbs.OpRead, Flags: verbs.SendSignaled,
		SGEs: sge(a.mr, 10, 20), RemoteKey: rb.Key, RemoteAddr: rb.At(100),
		Next: &verbs.SendRequest{ID: 2, Op: verbs.OpRead, Flags: verbs.SendSignaled,
			SGEs: sge(a.mr, 4096, 8), RemoteKey: rb.Key, RemoteAddr: rb.At(4096)}}
	if _, err := a.qp.PostSend(rd); err != nil {
		t.Fatal(err)
	}
	cs := waitCQ(t, a.cq, 2)
	wantStatus(t, cs[0], 1, verbs.OpRead, verbs.StatusSuccess)
	wantStatus(t, cs[1], 2, verbs.OpRead, verbs.StatusSuccess)
	if cs[0].ByteLen != 20 {
		t.Errorf("READ byte length %d, want 20", cs[0].ByteLen)
	}
	if got := string(a.mr.Bytes()[10:30]); got != "hello, remote memory" {
		t.Errorf("READ got %q", got)
	}
	if got := binary.LittleEndian.Uint64(a.mr.Bytes()[4096:]); got != 0x1122334455667788 {
		t.Errorf("8-byte READ got %#x", got)
	}
}

// TestSmallAlignedWrites covers the single-store path for every size and
// checks that neighbouring bytes are untouched.
func TestSmallAlignedWrites(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	rb := b.mr.Remote()
	dst := b.mr.Bytes()
	for i := range 64 {
		dst[i] = 0xee
	}
	copy(a.mr.Bytes(), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	for _, c := range []struct{ off, n uint64 }{{0, 8}, {8, 4}, {12, 2}, {15, 1}, {17, 2}, {21, 4}} {
		wr := &verbs.SendRequest{ID: c.off, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: sge(a.mr, 0, uint32(c.n)), RemoteKey: rb.Key, RemoteAddr: rb.At(16 + c.off)}
		if _, err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, waitCQ(t, a.cq, 1)[0], c.off, verbs.OpWrite, verbs.StatusSuccess)
	}
	want := []byte{
		0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
		1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 1, 2, 0xee, 1,
		0xee, 1, 2, 0xee, 0xee, 1, 2, 3, 4, 0xee,
	}
	if got := dst[:len(want)]; !bytes.Equal(got, want) {
		t.Errorf("memory\n got %v\nwant %v", got, want)
	}
}

func TestPostListPartialFailure(t *testing.T) {
	t.Run("post-time", func(t *testing.T) {
		a, b := newPair(t, verbs.QPConfig{MaxInline: 16, MaxSGE: 2}, 4096)
		rb := b.mr.Remote()
		w := func(id uint64, next *verbs.SendRequest) *verbs.SendRequest {
			return &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
				SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key, RemoteAddr: rb.At(id * 8), Next: next}
		}
		for _, bad := range []*verbs.SendRequest{
			{ID: 9, Op: verbs.OpRecv},
			{ID: 9, Op: verbs.OpWrite, Flags: verbs.SendInline, SGEs: sge(a.mr, 0, 17)},
			{ID: 9, Op: verbs.OpRead, Flags: verbs.SendInline, SGEs: sge(a.mr, 0, 1)},
			{ID: 9, Op: verbs.OpWrite, SGEs: make([]verbs.SGE, 3)},
		} {
			chain := w(1, bad)
			bad.Next = w(3, nil)
			got, err := a.qp.PostSend(chain)
			if got != bad || !isErr(err, verbs.ErrInvalid) {
				t.Fatalf("PostSend = %v, %v; want the bad request and ErrInvalid", got, err)
			}
			wantStatus(t, waitCQ(t, a.cq, 1)[0], 1, verbs.OpWrite, verbs.StatusSuccess)
			if n, _ := a.cq.Poll(make([]verbs.Completion, 4)); n != 0 {
				t.Fatalf("%d completions after the failing request", n)
			}
		}
		if a.qp.State() != verbs.QPReady {
			t.Fatalf("state %v after post-time errors", a.qp.State())
		}
	})
	t.Run("execution", func(t *testing.T) {
		a, b := newPair(t, verbs.QPConfig{}, 4096)
		rb := b.mr.Remote()
		chain := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key, RemoteAddr: 0,
			Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key + 1000, RemoteAddr: 0,
				Next: &verbs.SendRequest{ID: 3, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8), RemoteKey: rb.Key}}}
		if bad, err := a.qp.PostSend(chain); err != nil {
			t.Fatalf("PostSend: %v at %d", err, bad.ID)
		}
		cs := waitCQ(t, a.cq, 2)
		wantStatus(t, cs[0], 2, verbs.OpWrite, verbs.StatusRemoteAccess)
		wantStatus(t, cs[1], 3, verbs.OpWrite, verbs.StatusFlushed)
		if a.qp.State() != verbs.QPError {
			t.Fatalf("state %v, want error", a.qp.State())
		}
		if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 4, Op: verbs.OpWrite}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, waitCQ(t, a.cq, 1)[0], 4, verbs.OpWrite, verbs.StatusFlushed)
	})
}
