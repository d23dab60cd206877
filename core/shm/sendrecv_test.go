package shm

import (
	"bytes"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestSendWaitsForRecv: a SEND that finds no RECV waits (receiver not
// ready), and so does a WRITE posted behind it; both complete, in order,
// once the receiver posts.
func TestSendWaitsForRecv(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 8192)
	rb := b.mr.Remote()
	copy(a.mr.Bytes(), "ping")
	copy(a.mr.Bytes()[100:], "late")
	chain := &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 4),
		Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 100, 4),
			RemoteKey: rb.Key, RemoteAddr: rb.At(200)}}
	if _, err := a.qp.PostSend(chain); err != nil {
		t.Fatal(err)
	}
	// Without a RECV neither request can have completed or landed.
	if n, _ := a.cq.Poll(make([]verbs.Completion, 4)); n != 0 {
		t.Fatalf("%d send completions before any RECV", n)
	}
	if got := b.mr.Bytes()[200:204]; !bytes.Equal(got, make([]byte, 4)) {
		t.Fatalf("WRITE behind a waiting SEND landed early: %q", got)
	}
	if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 7, SGEs: sge(b.mr, 0, 64)}); err != nil {
		t.Fatal(err)
	}
	rc := waitCQ(t, b.cq, 1)[0]
	wantStatus(t, rc, 7, verbs.OpRecv, verbs.StatusSuccess)
	if rc.ByteLen != 4 || string(b.mr.Bytes()[:4]) != "ping" || rc.HasImm {
		t.Fatalf("RECV %+v data %q", rc, b.mr.Bytes()[:4])
	}
	cs := waitCQ(t, a.cq, 2)
	wantStatus(t, cs[0], 1, verbs.OpSend, verbs.StatusSuccess)
	wantStatus(t, cs[1], 2, verbs.OpWrite, verbs.StatusSuccess)
	if got := string(b.mr.Bytes()[200:204]); got != "late" {
		t.Fatalf("WRITE behind the SEND: %q", got)
	}
}

// TestSendRecvManyWrap pushes enough SENDs of mixed sizes, with and
// without immediates and scatter lists, to wrap the ring several times.
func TestSendRecvManyWrap(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{MaxSend: 64, MaxRecv: 64, MaxSGE: 2, MaxInline: 128}, 1<<18)
	const n = 400
	sizes := []uint32{0, 1, 60, 100, 4000, 40000, MaxMessageSize}
	src := a.mr.Bytes()
	for i := range src {
		src[i] = byte(i * 7)
	}
	go func() {
		for i := 0; i < n; i++ {
			size := sizes[i%len(sizes)]
			half := size / 2
			wr := &verbs.SendRequest{ID: uint64(i), Op: verbs.OpSend, Flags: verbs.SendSignaled,
				SGEs: []verbs.SGE{{Key: a.mr.LocalKey(), Offset: uint64(i), Length: half},
					{Key: a.mr.LocalKey(), Offset: uint64(i) + uint64(half), Length: size - half}},
				HasImm: i%3 == 0, Imm: uint32(i)}
			if size <= 128 && i%2 == 0 {
				wr.Flags |= verbs.SendInline
			}
			deadline := time.Now().Add(waitLimit)
			for {
				_, err := a.qp.PostSend(wr)
				if err == nil {
					break
				}
				if !isErr(err, verbs.ErrQueueFull) || time.Now().After(deadline) {
					t.Errorf("post %d: %v", i, err)
					return
				}
				if n, err := a.cq.Poll(make([]verbs.Completion, 64)); err != nil || n == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}
	}()
	dst := b.mr.Bytes()
	for i := 0; i < n; i++ {
		size := sizes[i%len(sizes)]
		off := uint64(i%2) * MaxMessageSize
		rr := &verbs.RecvRequest{ID: uint64(i), SGEs: []verbs.SGE{
			{Key: b.mr.LocalKey(), Offset: off, Length: 100},
			{Key: b.mr.LocalKey(), Offset: off + 100, Length: MaxMessageSize}}}
		if _, err := b.qp.PostRecv(rr); err != nil {
			t.Fatal(err)
		}
		c := waitCQ(t, b.cq, 1)[0]
		wantStatus(t, c, uint64(i), verbs.OpRecv, verbs.StatusSuccess)
		if c.ByteLen != size || c.HasImm != (i%3 == 0) || (c.HasImm && c.Imm != uint32(i)) {
			t.Fatalf("RECV %d: %+v, want %d bytes", i, c, size)
		}
		if !bytes.Equal(dst[off:off+uint64(size)], src[i:i+int(size)]) {
			t.Fatalf("RECV %d: payload differs", i)
		}
	}
}

func TestWriteWithImm(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	rb := b.mr.Remote()
	copy(a.mr.Bytes(), "immediate data")
	if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 5}); err != nil {
		t.Fatal(err)
	}
	wr := &verbs.SendRequest{ID: 1, Op: verbs.OpWriteWithImm, Flags: verbs.SendSignaled, Imm: 0xfeed,
		SGEs: sge(a.mr, 0, 14), RemoteKey: rb.Key, RemoteAddr: rb.At(1000)}
	if _, err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	c := waitCQ(t, b.cq, 1)[0]
	wantStatus(t, c, 5, verbs.OpRecvWithImm, verbs.StatusSuccess)
	if !c.HasImm || c.Imm != 0xfeed || c.ByteLen != 14 {
		t.Fatalf("RECV_WITH_IMM %+v", c)
	}
	if got := string(b.mr.Bytes()[1000:1014]); got != "immediate data" {
		t.Fatalf("data %q", got)
	}
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 1, verbs.OpWriteWithImm, verbs.StatusSuccess)
}

// TestSendLargerThanRecv: StatusLocalLength at the receiver, StatusRemoteInvalid
// at the sender, both queue pairs in error, later work flushed.
func TestSendLargerThanRecv(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	for _, id := range []uint64{1, 2} {
		if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: id, SGEs: sge(b.mr, 0, 10)}); err != nil {
			t.Fatal(err)
		}
	}
	chain := &verbs.SendRequest{ID: 1, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 100),
		Next: &verbs.SendRequest{ID: 2, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 1)}}
	if _, err := a.qp.PostSend(chain); err != nil {
		t.Fatal(err)
	}
	rc := waitCQ(t, b.cq, 2)
	wantStatus(t, rc[0], 1, verbs.OpRecv, verbs.StatusLocalLength)
	wantStatus(t, rc[1], 2, verbs.OpRecv, verbs.StatusFlushed)
	sc := waitCQ(t, a.cq, 2)
	wantStatus(t, sc[0], 1, verbs.OpSend, verbs.StatusRemoteInvalid)
	wantStatus(t, sc[1], 2, verbs.OpSend, verbs.StatusFlushed)
	waitFor(t, "both queue pairs in error", func() bool {
		return a.qp.State() == verbs.QPError && b.qp.State() == verbs.QPError
	})
}

func TestSendOverMaxMessage(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 2*MaxMessageSize)
	if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 1, SGEs: sge(b.mr, 0, 2*MaxMessageSize)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 1, Op: verbs.OpSend, SGEs: sge(a.mr, 0, MaxMessageSize+1)}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 1, verbs.OpSend, verbs.StatusLocalLength)
	if a.qp.State() != verbs.QPError {
		t.Fatalf("state %v", a.qp.State())
	}
}
