package shm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// Requests posted behind records the peer has not consumed travel in the
// ring (carried) instead of waiting for an acknowledgement; these tests
// pin down that they still execute in order, at the peer, with the peer's
// checks.

// TestCarriedWritesKeepOrder: WRITE_WITH_IMMs and a plain WRITE posted
// behind a SEND the receiver has no RECV for yet land nowhere until it
// posts; then each WRITE_WITH_IMM's data is visible when its RECV
// completes, in post order, and a large WRITE (too big for the ring)
// waits for acknowledgements and lands last.
func TestCarriedWritesKeepOrder(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{MaxInline: 64}, 1<<18)
	rb := b.mr.Remote()
	for i := range a.mr.Bytes() {
		a.mr.Bytes()[i] = byte(i*7 + 3)
	}
	const big = MaxMessageSize + 4096
	chain := []*verbs.SendRequest{
		{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 16)},
		{ID: 2, Op: verbs.OpWriteWithImm, Imm: 20, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 64, 4096),
			RemoteKey: rb.Key, RemoteAddr: rb.At(4096)},
		{ID: 3, Op: verbs.OpWrite, Flags: verbs.SendSignaled | verbs.SendInline, SGEs: sge(a.mr, 8, 8),
			RemoteKey: rb.Key, RemoteAddr: rb.At(64)}, // one aligned word
		{ID: 4, Op: verbs.OpWriteWithImm, Imm: 40, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 128, 0),
			RemoteKey: rb.Key, RemoteAddr: rb.At(0)},
		{ID: 5, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, big),
			RemoteKey: rb.Key, RemoteAddr: rb.At(1 << 17)},
	}
	for i := range chain[:len(chain)-1] {
		chain[i].Next = chain[i+1]
	}
	if _, err := a.qp.PostSend(chain[0]); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.cq.Poll(make([]verbs.Completion, 8)); n != 0 {
		t.Fatalf("%d send completions before any RECV", n)
	}
	if !bytes.Equal(b.mr.Bytes()[:1<<18], make([]byte, 1<<18)) {
		t.Fatal("a request behind a SEND waiting for its RECV changed the receiver's region")
	}
	postRecvsAt(t, b, 10, 3, 2048)
	rc := waitCQ(t, b.cq, 3)
	wantStatus(t, rc[0], 10, verbs.OpRecv, verbs.StatusSuccess)
	wantStatus(t, rc[1], 11, verbs.OpRecvWithImm, verbs.StatusSuccess)
	wantStatus(t, rc[2], 12, verbs.OpRecvWithImm, verbs.StatusSuccess)
	if !rc[1].HasImm || rc[1].Imm != 20 || rc[1].ByteLen != 4096 || !rc[2].HasImm || rc[2].Imm != 40 || rc[2].ByteLen != 0 {
		t.Fatalf("WRITE_WITH_IMM receive completions %+v %+v", rc[1], rc[2])
	}
	cs := waitCQ(t, a.cq, 5)
	for i, c := range cs {
		wantStatus(t, c, uint64(i+1), chain[i].Op, verbs.StatusSuccess)
	}
	src, dst := a.mr.Bytes(), b.mr.Bytes()
	switch {
	case !bytes.Equal(dst[2048:2064], src[0:16]):
		t.Fatal("SEND payload differs")
	case !bytes.Equal(dst[4096:8192], src[64:64+4096]):
		t.Fatal("carried WRITE_WITH_IMM data differs")
	case !bytes.Equal(dst[64:72], src[8:16]):
		t.Fatal("carried WRITE data differs")
	case !bytes.Equal(dst[1<<17:1<<17+big], src[:big]):
		t.Fatal("large WRITE behind carried requests differs")
	}
}

// TestCarriedWriteErrors: a carried WRITE naming a key the receiver does
// not know completes with StatusRemoteAccess at the sender (checked before
// it is sent), and one naming a region the receiver closed after it was
// sent completes with StatusRemoteAccess too (checked by the receiver);
// the requests behind it are flushed and both queue pairs fail; nothing
// lands.
func TestCarriedWriteErrors(t *testing.T) {
	t.Run("unknown key", func(t *testing.T) {
		a, b := newPair(t, verbs.QPConfig{}, 8192)
		rb := b.mr.Remote()
		chain := &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8),
			Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWriteWithImm, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8),
				RemoteKey: rb.Key + 0x10000, RemoteAddr: 0,
				Next: &verbs.SendRequest{ID: 3, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8),
					RemoteKey: rb.Key, RemoteAddr: rb.At(256)}}}
		if _, err := a.qp.PostSend(chain); err != nil {
			t.Fatal(err)
		}
		if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 7, SGEs: sge(b.mr, 0, 64)}); err != nil {
			t.Fatal(err)
		}
		cs := waitCQ(t, a.cq, 3)
		wantStatus(t, cs[0], 1, verbs.OpSend, verbs.StatusSuccess)
		wantStatus(t, cs[1], 2, verbs.OpWriteWithImm, verbs.StatusRemoteAccess)
		wantStatus(t, cs[2], 3, verbs.OpWrite, verbs.StatusFlushed)
		if v := binary.LittleEndian.Uint64(b.mr.Bytes()[256:]); v != 0 {
			t.Fatalf("a WRITE behind a failed one landed: %#x", v)
		}
	})
	t.Run("region closed at the receiver", func(t *testing.T) {
		a, b := newPair(t, verbs.QPConfig{}, 8192)
		target, err := b.p.RegisterRegion(4096, accessAll)
		if err != nil {
			t.Fatal(err)
		}
		rt := target.Remote()
		chain := &verbs.SendRequest{ID: 1, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8),
			Next: &verbs.SendRequest{ID: 2, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 64),
				RemoteKey: rt.Key, RemoteAddr: rt.At(0),
				Next: &verbs.SendRequest{ID: 3, Op: verbs.OpSend, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 8)}}}
		if _, err := a.qp.PostSend(chain); err != nil {
			t.Fatal(err)
		}
		if err := target.Close(); err != nil {
			t.Fatal(err)
		}
		postRecvsAt(t, b, 7, 2, 0)
		cs := waitCQ(t, a.cq, 3)
		wantStatus(t, cs[0], 1, verbs.OpSend, verbs.StatusSuccess)
		wantStatus(t, cs[1], 2, verbs.OpWrite, verbs.StatusRemoteAccess)
		wantStatus(t, cs[2], 3, verbs.OpSend, verbs.StatusFlushed)
		rc := waitCQ(t, b.cq, 2)
		wantStatus(t, rc[0], 7, verbs.OpRecv, verbs.StatusSuccess)
		wantStatus(t, rc[1], 8, verbs.OpRecv, verbs.StatusFlushed)
		waitFor(t, "both queue pairs in error", func() bool {
			return a.qp.State() == verbs.QPError && b.qp.State() == verbs.QPError
		})
	})
}

// postRecvsAt posts n receives with ids from first on, each into the 64
// bytes at offset off of s's region.
func postRecvsAt(t *testing.T, s *side, first uint64, n int, off uint64) {
	t.Helper()
	for id := first; id < first+uint64(n); id++ {
		if _, err := s.qp.PostRecv(&verbs.RecvRequest{ID: id, SGEs: sge(s.mr, off, 64)}); err != nil {
			t.Fatal(err)
		}
	}
}
