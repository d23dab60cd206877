package mux

import (
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// schedTransport is an in-memory Transport for scheduler tests: TrySend
// logs headers while fewer than room blocks are unacknowledged; the test
// frees room with free. Nothing is ever received.
type schedTransport struct {
	mu    sync.Mutex
	room  int
	sent  []wire.BlockHeader
	space chan struct{} // rung by free
	done  chan struct{} // closed by Close
	once  sync.Once
}

func (f *schedTransport) MaxPayload() int { return 1000 }
func (f *schedTransport) TrySend(h wire.BlockHeader, p []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.room == 0 {
		return false, nil
	}
	f.room--
	h.Len = uint32(len(p))
	f.sent = append(f.sent, h)
	return true, nil
}
func (f *schedTransport) Receive() (wire.Block, bool, error) { return wire.Block{}, false, nil }
func (f *schedTransport) Release(wire.Block)                 {}
func (f *schedTransport) SpaceBell() wait.Doorbell           { return schedBell{f.space, f.done} }
func (f *schedTransport) DataBell() wait.Doorbell            { return schedBell{nil, f.done} }
func (f *schedTransport) Close() error                       { f.once.Do(func() { close(f.done) }); return nil }

func (f *schedTransport) free(n int) {
	f.mu.Lock()
	f.room += n
	f.mu.Unlock()
	select {
	case f.space <- struct{}{}:
	default:
	}
}

func (f *schedTransport) log() []wire.BlockHeader {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.BlockHeader(nil), f.sent...)
}

type schedBell struct{ ring, done chan struct{} }

func (schedBell) Arm() error { return nil }
func (schedBell) Disarm()    {}
func (b schedBell) Sleep(deadline time.Time) error {
	select {
	case <-b.ring: // nil for the data bell: never
		return nil
	case <-b.done:
		return verbs.ErrClosed
	}
}

type schedFlow struct{}

func (schedFlow) Name() string                            { return "all" }
func (schedFlow) NextSegment(queued, msg, max int) int    { return min(queued, max) }
func (schedFlow) Sent(int)                                {}
func (schedFlow) Buffered() bool                          { return false }
func (schedFlow) AsyncFlush() bool                        { return true }
func (schedFlow) Open() []wire.ControlRecord              { return nil }
func (schedFlow) Consumed(int) (wire.ControlRecord, bool) { return wire.ControlRecord{}, false }
func (schedFlow) OnControl(wire.ControlRecord) error      { return nil }
func (schedFlow) Arrived(int) error                       { return nil }

// TestSchedulerRoundRobin: a bulk write holds the channel; a small write
// that arrives meanwhile goes out within one round (one bulk block at
// most), and then the bulk write goes on.
func TestSchedulerRoundRobin(t *testing.T) {
	f := &schedTransport{room: 4, space: make(chan struct{}, 1), done: make(chan struct{})}
	c, err := NewChannel(f, ChannelConfig{Initiator: true, NewFlow: func() wire.FlowController { return schedFlow{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bulk, _ := c.Open()
	small, _ := c.Open()
	bulk.SetWriteDeadline(time.Now().Add(20 * time.Second))
	small.SetWriteDeadline(time.Now().Add(20 * time.Second))
	go bulk.Write(make([]byte, 100*1000)) // 100 blocks
	waitFor(t, func() bool { return len(f.log()) == 4 })
	done := make(chan error, 1)
	go func() { _, err := small.Write([]byte("hi")); done <- err }()
	waitFor(t, func() bool { small.mu.Lock(); defer small.mu.Unlock(); return small.queued > 0 })
	for i := 0; i < 3; i++ {
		f.free(1)
		waitFor(t, func() bool { return len(f.log()) == 5+i })
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var order []uint32
	for _, h := range f.log()[4:] {
		if h.Flags&wire.FlagData != 0 {
			order = append(order, h.Stream)
		}
	}
	if len(order) < 2 || (order[0] != small.ID() && order[1] != small.ID()) {
		t.Fatalf("data blocks after the small write arrived: streams %v (small is %d)", order, small.ID())
	}
	if order[len(order)-1] != bulk.ID() {
		t.Fatalf("the bulk write did not go on after the small one: %v", order)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
