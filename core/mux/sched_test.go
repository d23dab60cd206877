package mux

import (
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wire"
)

// countTransport is a schedTransport that counts the blocks each stream
// holds at the receiver (a BlockCounter): a block sent is held until the
// test drains it.
type countTransport struct {
	schedTransport
	blocks int
	hmu    sync.Mutex
	held   map[uint32]int
}

func (f *countTransport) TrySend(h wire.BlockHeader, p []byte) (bool, error) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	if f.total() >= f.blocks {
		return false, nil
	}
	ok, err := f.schedTransport.TrySend(h, p)
	if ok {
		f.held[h.Stream]++
	}
	return ok, err
}

func (f *countTransport) total() int {
	n := 0
	for _, k := range f.held {
		n += k
	}
	return n
}

func (f *countTransport) Blocks() int { return f.blocks }
func (f *countTransport) Held(s uint32) (int, bool) {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.held[s], false
}
func (f *countTransport) Free() int {
	f.hmu.Lock()
	defer f.hmu.Unlock()
	return f.blocks - f.total()
}
func (f *countTransport) Refresh() error { return nil }

func (f *countTransport) heldBy(s uint32) int { n, _ := f.Held(s); return n }

func newSchedChannel(t *testing.T, tr wire.Transport, sub int) *Channel {
	t.Helper()
	c, err := NewChannel(tr, ChannelConfig{Initiator: true, SubWrite: sub, NewFlow: func() wire.FlowController { return schedFlow{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openWriting(t *testing.T, c *Channel, n int) *Stream {
	t.Helper()
	s, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	s.SetWriteDeadline(time.Now().Add(20 * time.Second))
	go s.Write(make([]byte, n))
	return s
}

func queuedOf(s *Stream) int { s.mu.Lock(); defer s.mu.Unlock(); return s.queued }

func dataStreams(log []wire.BlockHeader) []uint32 {
	var out []uint32
	for _, h := range log {
		if h.Flags&wire.FlagData != 0 {
			out = append(out, h.Stream)
		}
	}
	return out
}

// TestSubWriteTurns: with a sub-write of three blocks, a bulk write that
// meets a small one sends at most three blocks before the small one goes,
// and the scheduling point is counted as the bulk stream's preemption.
func TestSubWriteTurns(t *testing.T) {
	f := &schedTransport{room: 2, space: make(chan struct{}, 1), done: make(chan struct{})}
	c := newSchedChannel(t, f, 3*f.MaxPayload())
	bulk := openWriting(t, c, 100*1000)
	waitFor(t, func() bool { return len(f.log()) == 2 })
	small := openWriting(t, c, 10)
	waitFor(t, func() bool { return queuedOf(small) > 0 })
	f.free(20)
	waitFor(t, func() bool { return queuedOf(small) == 0 && len(f.log()) == 22 })
	order := dataStreams(f.log())
	at := -1
	for i, id := range order {
		if id == small.ID() {
			at = i
		}
	}
	if at < 0 || at > 4 {
		t.Fatalf("the small write went as data block %d (want within the bulk's sub-write, at most 4): %v; all %+v", at, order, f.log())
	}
	if p := bulk.SchedStats().Preemptions; p == 0 {
		t.Fatalf("bulk stream preempted %d times, want at least 1", p)
	}
}

// TestSmallFirst: a stream whose queued data fits in one sub-write goes
// before bulk streams whatever the round-robin position.
func TestSmallFirst(t *testing.T) {
	f := &schedTransport{room: 0, space: make(chan struct{}, 1), done: make(chan struct{})}
	c := newSchedChannel(t, f, 0)
	a := openWriting(t, c, 50*1000)
	b := openWriting(t, c, 50*1000)
	small := openWriting(t, c, 10)
	waitFor(t, func() bool { return queuedOf(a) > 0 && queuedOf(b) > 0 && queuedOf(small) > 0 })
	// Three announcements and a data block: the small stream's data must be
	// the first data block.
	f.free(4)
	waitFor(t, func() bool { return len(dataStreams(f.log())) >= 1 })
	if got := dataStreams(f.log())[0]; got != small.ID() {
		t.Fatalf("first data block is stream %d's, want the small stream %d", got, small.ID())
	}
}

// TestPreemptOff: with preemption off a bulk write keeps its turn while it
// can send, so a small write queued meanwhile waits for it.
func TestPreemptOff(t *testing.T) {
	f := &schedTransport{room: 3, space: make(chan struct{}, 1), done: make(chan struct{})}
	c := newSchedChannel(t, f, -1)
	small, err := c.Open() // announced before the bulk write starts
	if err != nil {
		t.Fatal(err)
	}
	small.SetWriteDeadline(time.Now().Add(20 * time.Second))
	bulk := openWriting(t, c, 10*1000)
	waitFor(t, func() bool { return len(f.log()) == 3 })
	go small.Write(make([]byte, 10))
	waitFor(t, func() bool { return queuedOf(small) > 0 })
	f.free(20)
	waitFor(t, func() bool { return queuedOf(small) == 0 && queuedOf(bulk) == 0 })
	order := dataStreams(f.log())
	if order[len(order)-1] != small.ID() {
		t.Fatalf("with preemption off the small write went before the bulk one ended: %v", order)
	}
	if p := bulk.SchedStats().Preemptions; p != 0 {
		t.Fatalf("preemption off: %d preemptions counted", p)
	}
}

// TestWorkConserving: one stream alone is never preempted nor paused for
// a share: it takes every block the channel's cap allows in one flush.
func TestWorkConserving(t *testing.T) {
	f := &countTransport{schedTransport: schedTransport{room: 1 << 20, space: make(chan struct{}, 1), done: make(chan struct{})},
		blocks: 8, held: map[uint32]int{}}
	c := newSchedChannel(t, f, 0)
	s := openWriting(t, c, 100*1000)
	waitFor(t, func() bool { return f.heldBy(s.ID()) == c.heldCap })
	if st := s.SchedStats(); st != (SchedStats{}) {
		t.Fatalf("a stream alone: %+v, want no preemptions or pauses", st)
	}
}

// TestShare: two backlogged streams each get their share of the
// receiver's blocks: the first cannot take more than half before the
// second has its blocks, and the pause is counted.
func TestShare(t *testing.T) {
	f := &countTransport{schedTransport: schedTransport{room: 1 << 20, space: make(chan struct{}, 1), done: make(chan struct{})},
		blocks: 8, held: map[uint32]int{}}
	c := newSchedChannel(t, f, 0)
	f.hmu.Lock() // nothing goes until both streams are queued
	f.blocks = 0
	f.hmu.Unlock()
	a := openWriting(t, c, 100*1000)
	b := openWriting(t, c, 100*1000)
	waitFor(t, func() bool { return queuedOf(a) > 0 && queuedOf(b) > 0 })
	f.hmu.Lock()
	f.blocks = 8
	f.hmu.Unlock()
	f.free(0)
	c.flush()
	// Announcements, then data until the last free block (the reserve);
	// one stream then meets its share at its next turn.
	waitFor(t, func() bool { return f.heldBy(a.ID())+f.heldBy(b.ID()) >= 7 })
	waitFor(t, func() bool { return a.SchedStats().Pauses+b.SchedStats().Pauses > 0 })
	if ha, hb := f.heldBy(a.ID()), f.heldBy(b.ID()); ha > 4 || hb > 4 {
		t.Fatalf("held blocks %d and %d of 8, want at most 4 each", ha, hb)
	}
}
