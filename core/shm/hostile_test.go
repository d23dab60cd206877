package shm

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// A hostile or broken peer can write anything into the control areas it
// maps and send anything on the side channel. These tests play that peer
// through side a's mappings and check that side b fails cleanly: QPError,
// every outstanding request completed, no crash, no hang.

// expectFailed waits for b to reach QPError with its posted RECV flushed.
func expectFailed(t *testing.T, b *side, recvID uint64) {
	t.Helper()
	c := waitCQ(t, b.cq, 1)[0]
	if c.ID != recvID || c.Status == verbs.StatusSuccess {
		t.Fatalf("RECV completed %+v, want an error", c)
	}
	waitFor(t, "QPError", func() bool { return b.qp.State() == verbs.QPError })
}

func TestHostileInboundRing(t *testing.T) {
	const kindSend = recSend
	cases := []struct {
		name  string
		write func(ring []byte, prod *uint64)
	}{
		{"producer beyond the ring", func(ring []byte, prod *uint64) { *prod = ringSize + recAlign }},
		{"producer unaligned", func(ring []byte, prod *uint64) { *prod = 3 }},
		{"producer far ahead", func(ring []byte, prod *uint64) { *prod = 1 << 62 }},
		{"unknown record kind", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, 0, 99, 0)
			*prod = recAlign
		}},
		{"length over the message limit", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, MaxMessageSize+1, kindSend, 0)
			*prod = ringSize
		}},
		{"record longer than produced", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, 1000, kindSend, 0)
			*prod = recAlign
		}},
		{"pad longer than produced", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, 0, recPad, 0)
			*prod = recAlign
		}},
		{"length all ones", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, ^uint32(0), kindSend, 0)
			*prod = ringSize
		}},
		{"carried write over the message limit", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, MaxMessageSize+1, recWriteData, 0)
			*prod = ringSize
		}},
		{"carried write past its region", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, 64, recWriteData, 0)
			binary.LittleEndian.PutUint64(ring[recHeader:], ^uint64(0)-8) // address wraps
			binary.LittleEndian.PutUint32(ring[recHeader+8:], 1)          // b's region
			*prod = recordSize(writeHeader + 64)
		}},
		{"carried write to an unknown key", func(ring []byte, prod *uint64) {
			putRecordHeader(ring, 0, 8, recWrite, 0)
			binary.LittleEndian.PutUint32(ring[recHeader+8:], 0xdead)
			*prod = recordSize(writeHeader + 8)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := newPair(t, verbs.QPConfig{}, 4096)
			if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 1, SGEs: sge(b.mr, 0, 4096)}); err != nil {
				t.Fatal(err)
			}
			qa := a.q()
			var prod uint64
			c.write(qa.peer.ring, &prod)
			qa.peer.prod.Store(prod)
			ringEventfd(qa.peerEfd)
			expectFailed(t, b, 1)
		})
	}
}

// TestHostileScribble overwrites the victim's whole control area with
// random bytes, again and again while the victim runs.
func TestHostileScribble(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		a, b := newPair(t, verbs.QPConfig{}, 4096)
		if _, err := b.qp.PostRecv(&verbs.RecvRequest{ID: 1, SGEs: sge(b.mr, 0, 4096)}); err != nil {
			t.Fatal(err)
		}
		qa := a.q()
		rng := rand.New(rand.NewPCG(seed, 0))
		mem := qa.peer.mem
		for round := 0; round < 4; round++ {
			for i := 0; i+8 <= len(mem); i += 8 {
				binary.LittleEndian.PutUint64(mem[i:], rng.Uint64())
			}
			ringEventfd(qa.peerEfd)
		}
		expectFailed(t, b, 1)
	}
}

// TestHostileOwnerWords: the receiver publishes garbage acknowledgement
// and state words; the sender of a SEND in flight fails cleanly.
func TestHostileOwnerWords(t *testing.T) {
	cases := []struct {
		name  string
		write func(a *area)
	}{
		{"consumer beyond producer", func(a *area) { a.cons.Store(1 << 40) }},
		{"consumer unaligned", func(a *area) { a.cons.Store(1) }},
		{"unknown state", func(a *area) { a.state.Store(77) }},
		{"state back to init", func(a *area) { a.state.Store(wireInit) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := newPair(t, verbs.QPConfig{}, 4096)
			if _, err := a.qp.PostSend(&verbs.SendRequest{ID: 1, Op: verbs.OpSend, SGEs: sge(a.mr, 0, 16)}); err != nil {
				t.Fatal(err)
			}
			qb := b.q()
			c.write(&qb.my) // what b publishes is what a reads
			ringEventfd(qb.peerEfd)
			got := waitCQ(t, a.cq, 1)[0]
			if got.ID != 1 || got.Status == verbs.StatusSuccess {
				t.Fatalf("SEND completed %+v, want an error", got)
			}
			waitFor(t, "QPError", func() bool { return a.qp.State() == verbs.QPError })
		})
	}
}

// TestHostileAnnouncements: garbage on the side channel (a descriptor that
// is not a sealed memfd, a short message, a lying length) never maps
// anything; the region stays unknown and the queue pair fails.
func TestHostileAnnouncements(t *testing.T) {
	pipe := func(t *testing.T) int {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(p[1])
		return p[0]
	}
	memfd := func(t *testing.T, size int, seal bool) int {
		flags := unix.MFD_CLOEXEC
		if seal {
			flags |= unix.MFD_ALLOW_SEALING
		}
		fd, err := unix.MemfdCreate("hostile", flags)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, int64(size))
		if seal {
			unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
		}
		return fd
	}
	cases := []struct {
		name string
		size int // message bytes
		fd   func(t *testing.T) int
	}{
		{"pipe instead of a memfd", annSize, pipe},
		{"memfd without seals", annSize, func(t *testing.T) int { return memfd(t, 4096, false) }},
		{"memfd shorter than announced", annSize, func(t *testing.T) int { return memfd(t, 1024, true) }},
		{"short message", 7, func(t *testing.T) int { return -1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := newPair(t, verbs.QPConfig{}, 4096)
			qb := b.q()
			msg := make([]byte, annSize)
			binary.LittleEndian.PutUint32(msg[0:], annAdd)
			binary.LittleEndian.PutUint32(msg[4:], 4242)
			binary.LittleEndian.PutUint64(msg[8:], 4096)
			binary.LittleEndian.PutUint32(msg[16:], uint32(accessAll))
			var oob []byte
			if fd := c.fd(t); fd >= 0 {
				oob = unix.UnixRights(fd)
				defer unix.Close(fd)
			}
			if _, err := unix.SendmsgN(qb.keep, msg[:c.size], oob, nil, 0); err != nil {
				t.Fatal(err)
			}
			qb.my.epoch.Add(1)
			wr := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, SGEs: sge(a.mr, 0, 16), RemoteKey: 4242}
			if _, err := a.qp.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			if c := waitCQ(t, a.cq, 1)[0]; c.ID != 1 || c.Status == verbs.StatusSuccess {
				t.Fatalf("WRITE to a badly announced region completed %+v", c)
			}
			waitFor(t, "QPError", func() bool { return a.qp.State() == verbs.QPError })
		})
	}
}
