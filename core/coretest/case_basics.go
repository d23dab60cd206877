package coretest

import (
	"errors"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// basicsA checks what a provider promises before any peer is involved:
// region sizes and keys, new queue pairs in QPInit, sends refused and
// receives accepted there, Close flushing, and Close of a busy provider.
func basicsA(s *side) {
	if s.p.Name() == "" {
		s.fatalf("Name() is empty")
	}
	for _, size := range []int{0, -1, verbs.MaxRegionSize + 1} {
		r, err := s.p.RegisterRegion(size, accessAll)
		if err == nil {
			r.Close()
			s.fatalf("RegisterRegion(%d) succeeded, want an error wrapping ErrInvalid", size)
		}
		if !errors.Is(err, verbs.ErrInvalid) {
			s.fatalf("RegisterRegion(%d): %v, want an error wrapping ErrInvalid", size, err)
		}
	}

	local := s.region(4096, verbs.AccessLocalWrite)
	if i := nonzeroAt(local.Bytes()); i >= 0 {
		s.fatalf("new region is not zeroed: byte %d", i)
	}
	if k := local.Remote().Key; k != 0 {
		s.fatalf("region without remote access advertises key %#x, want 0", k)
	}
	remote := s.region(8192, accessAll)
	rr := remote.Remote()
	if rr.Key == 0 || rr.Len != 8192 {
		s.fatalf("region with remote access advertises %+v, want a nonzero key and Len 8192", rr)
	}
	if local.LocalKey() == remote.LocalKey() {
		s.fatalf("two regions share local key %#x", local.LocalKey())
	}
	fill(remote.Bytes(), 1) // the mapping is writable

	c1, c2 := s.newConn(verbs.QPConfig{}), s.newConn(verbs.QPConfig{})
	if c1.qp.Number() == c2.qp.Number() {
		s.fatalf("two queue pairs share number %d", c1.qp.Number())
	}

	// Sends are refused before Connect; the whole chain is returned.
	wr := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{sge(remote, 0, 8)}, RemoteAddr: rr.At(0), RemoteKey: rr.Key}
	bad, err := c1.qp.PostSend(wr)
	if bad != wr || !errors.Is(err, verbs.ErrNotReady) {
		s.fatalf("PostSend in QPInit returned (%p, %v), want (the request %p, ErrNotReady)", bad, err, wr)
	}
	// Receives are accepted before Connect and flushed by Close.
	rw := &verbs.RecvRequest{ID: 2, SGEs: []verbs.SGE{sge(local, 0, 64)}}
	if bad, err := c1.qp.PostRecv(rw); err != nil {
		s.fatalf("PostRecv in QPInit: bad %p, %v", bad, err)
	}
	s.noCompletion(c1.scq, "the refused send must not complete")
	s.closeNow(c1.closer)
	if st := c1.qp.State(); st != verbs.QPClosed {
		s.fatalf("queue pair in state %v after Close, want %v", st, verbs.QPClosed)
	}
	s.one(c1.rcq, 2, verbs.OpRecv, verbs.StatusFlushed)

	// A provider with live objects refuses Close and keeps working.
	if err := s.p.Close(); !errors.Is(err, verbs.ErrBusy) {
		s.fatalf("Close of a provider with live objects: %v, want ErrBusy", err)
	}
	again := s.region(4096, verbs.AccessLocalWrite)
	fill(again.Bytes(), 2)
	if s.p.Name() == "" {
		s.fatalf("Name() is empty after a refused Close")
	}
}
