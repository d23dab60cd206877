package shim

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// roundTrip sends msg from one fd of p to another and back, and fails
// unless both arrive whole.
func roundTrip(t *testing.T, p *Process, from, to int, msg []byte) {
	t.Helper()
	for _, hop := range [][2]int{{from, to}, {to, from}} {
		if n := call(t, func(done int, w *Wait) int64 { return p.Send(hop[0], msg[done:], 0, w) }); n != int64(len(msg)) {
			t.Fatalf("send on %d: %d", hop[0], n)
		}
		got := make([]byte, len(msg))
		if n := call(t, func(done int, w *Wait) int64 { return p.Recv(hop[1], got[done:], unix.MSG_WAITALL, w) }); n != int64(len(msg)) || !bytes.Equal(got, msg) {
			t.Fatalf("recv on %d: %d bytes, want %q", hop[1], n, msg)
		}
	}
}

// waitSlabsIdle waits until no connection holds an area of a slab of p
// (their handles released after the close's grace): on a loaded machine
// the reaper may be late.
func waitSlabsIdle(t *testing.T, p *Process) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(directGrace / 5) {
		busy := false
		p.areas.mu.Lock()
		for _, list := range p.areas.own {
			for _, sl := range list {
				for _, st := range sl.state {
					busy = busy || st == slotLive
				}
			}
		}
		for _, ps := range p.areas.peer {
			busy = busy || ps.n > 0
		}
		p.areas.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("slab areas still held 10 s after their connections closed")
		}
	}
}

// closePair closes both ends of a connection and its listener.
func closePair(p *Process, h *fakeHost, fds ...int) {
	for _, fd := range fds {
		if h.FDState(fd) != FDUnmanaged {
			p.Close(fd)
		}
		unix.Close(fd)
	}
}

// Connections between the same two processes take their areas from one
// slab once the acceptor's start time is known, reuse the areas of those
// that closed (after both sides let go), and refuse an offer of an area
// whose connection is still held; the slabs go at the idle release.
func TestDirectSlabReuse(t *testing.T) {
	p, h := newProcess(t)
	// A first connection stays open: it makes the peer's start known and
	// keeps the record of it.
	first, firstPeer := pair(t, p, h)
	roundTrip(t, p, first, firstPeer, []byte("first"))
	var retired slabArea
	for round := range 4 {
		var open []int
		for k := range 6 {
			lfd, cfd := listenConnect(t, p, h)
			afd := acceptOne(t, p, h, lfd)
			roundTrip(t, p, cfd, afd, []byte(fmt.Sprintf("round %d connection %d", round, k)))
			if ds := p.lookup(cfd).direct(); ds == nil || ds.where.own == nil {
				t.Fatalf("round %d, connection %d: its area is not a slab's", round, k)
			}
			open = append(open, lfd, cfd, afd)
		}
		if round == 0 {
			// An offer of an area a live connection holds is refused.
			ds := p.lookup(open[1]).direct()
			if _, _, err := p.peerArea(p.self, ds.where.own.s.FD(), ds.slotToken()); err != errSlotInUse {
				t.Fatalf("offer of a live connection's area: %v, want errSlotInUse", err)
			}
			// One whose connection another process may go on with (a
			// fork child kept it) is never given again.
			retired = p.lookup(open[4]).direct().where
			p.lookup(open[4]).direct().noReuse.Store(true)
		}
		closePair(p, h, open...)
		waitSlabsIdle(t, p) // both sides' handles released
		p.areas.mu.Lock()
		st := retired.own.state[retired.i]
		p.areas.mu.Unlock()
		if st != slotRetired {
			t.Fatalf("round %d: a kept connection's area is in state %d, want retired", round, st)
		}
	}
	if own, peer := p.areas.slabs(); own != 1 || peer != 1 {
		t.Fatalf("%d slabs made and %d mapped for 24 connections of at most 6 at a time, want one each", own, peer)
	}
	if n := p.Stats().Events()["area.slab"]; n != 1 {
		t.Fatalf("area.slab counted %d", n)
	}
	closePair(p, h, first, firstPeer)
	waitSlabsIdle(t, p)
	p.releaseIdle()
	if own, peer := p.areas.slabs(); own != 0 || peer != 0 {
		t.Fatalf("after the idle release: %d slabs made and %d mapped are left", own, peer)
	}
}

// slabs returns how many slabs this process made and how many peers'
// it maps (tests).
func (ap *areaPool) slabs() (own, peer int) {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	for _, l := range ap.own {
		own += len(l)
	}
	return own, len(ap.peer)
}
