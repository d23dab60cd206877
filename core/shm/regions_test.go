package shm

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// TestRegionAfterConnect: a region registered after Connect is reachable
// by the peer as soon as RegisterRegion returns; once closed, the peer's
// access fails with StatusRemoteAccess.
func TestRegionAfterConnect(t *testing.T) {
	a, b := newPair(t, verbs.QPConfig{}, 4096)
	late, err := b.p.RegisterRegion(100, verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	copy(a.mr.Bytes(), "late region")
	rl := late.Remote()
	if rl.Addr != 0 || rl.Len != 100 || rl.Key == 0 {
		t.Fatalf("remote %+v", rl)
	}
	wr := &verbs.SendRequest{ID: 1, Op: verbs.OpWrite, Flags: verbs.SendSignaled, SGEs: sge(a.mr, 0, 11),
		RemoteKey: rl.Key, RemoteAddr: rl.At(89)}
	if _, err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 1, verbs.OpWrite, verbs.StatusSuccess)
	if got := string(late.Bytes()[89:]); got != "late region" {
		t.Fatalf("late region holds %q", got)
	}
	if err := late.Close(); err != nil {
		t.Fatal(err)
	}
	wr.ID = 2
	if _, err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, waitCQ(t, a.cq, 1)[0], 2, verbs.OpWrite, verbs.StatusRemoteAccess)
}

// TestManyRegionsBeforeConnect: more announcements than the side channel
// holds are made before the peer connects; RegisterRegion never blocks and
// the peer still reaches every region.
func TestManyRegionsBeforeConnect(t *testing.T) {
	a, b := newSide(t, verbs.QPConfig{}, 4096), newSide(t, verbs.QPConfig{}, 4096)
	const n = 1500
	regions := make([]verbs.Region, n)
	for i := range regions {
		r, err := b.p.RegisterRegion(64, verbs.AccessRemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		regions[i] = r
	}
	// Close some while their announcements may still be backlogged.
	for i := 0; i < n; i += 3 {
		if err := regions[i].Close(); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, a, b)
	for _, i := range []int{1, n/2 + 1, n - 1} {
		rr := regions[i].Remote()
		wr := &verbs.SendRequest{ID: uint64(i), Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: sge(a.mr, 0, 8), RemoteKey: rr.Key}
		if _, err := a.qp.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, waitCQ(t, a.cq, 1)[0], uint64(i), verbs.OpWrite, verbs.StatusSuccess)
	}
	for i := 1; i < n; i++ {
		if i%3 != 0 {
			regions[i].Close()
		}
	}
	a.close(t)
	b.close(t)
}

// TestRegionsAreSealed: a peer holding a region's memfd cannot shrink it
// under the owner's mapping.
func TestRegionsAreSealed(t *testing.T) {
	p, _ := Open()
	r, err := p.RegisterRegion(100, verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer r.Close()
	fd := r.(*region).fd
	if err := unix.Ftruncate(fd, 0); err == nil {
		t.Fatal("a region's memfd could be truncated")
	}
}

// TestRegionsStayInTheirProvider: a region is announced (its memfd sent)
// only to the peers of its own provider's queue pairs. A process with two
// channels, one provider each: the peer of the second never receives the
// first channel's regions, registered before or after Connect.
func TestRegionsStayInTheirProvider(t *testing.T) {
	a1, b1 := newPair(t, verbs.QPConfig{}, 4096)
	a2, b2 := newPair(t, verbs.QPConfig{}, 4096)
	late, err := a1.p.RegisterRegion(8192, accessAll)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	waitFor(t, "channel 1's peer to map both of its regions", func() bool {
		q := b1.q()
		q.sqMu.Lock()
		defer q.sqMu.Unlock()
		q.drainAnnouncements()
		return q.remote[a1.mr.Remote().Key] != nil && q.remote[late.Remote().Key] != nil
	})
	q := b2.q()
	q.sqMu.Lock()
	q.drainAnnouncements()
	n, recv := len(q.remote), q.annRecv.Load()
	own := q.remote[a2.mr.Remote().Key]
	q.sqMu.Unlock()
	if n != 1 || recv != 1 || own == nil || own.length != 4096 {
		t.Fatalf("channel 2's peer maps %d regions after %d announcements, want only channel 2's own of 4096 bytes", n, recv)
	}
}
