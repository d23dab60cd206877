package mux

import (
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/core/wire"
)

// heldTransport is schedTransport with a BlockCounter whose view of what
// the peer holds changes only at Refresh, as the status-byte transport's
// does: the test sets the peer's state (peerRetained), and can stop the
// next Refresh right after its READ (gate) to let another goroutine run
// at that point.
type heldTransport struct {
	schedTransport
	vmu          sync.Mutex
	peerRetained bool               // the peer retains a block of every stream; +checklocks:vmu
	viewRetained bool               // what the sender saw at its last Refresh; +checklocks:vmu
	gate         chan chan struct{} // non-nil: the next Refresh hands over a channel and waits for its close; +checklocks:vmu
	refreshes    int                // +checklocks:vmu
}

func (f *heldTransport) Blocks() int { return 64 }
func (f *heldTransport) Free() int   { return 64 }

func (f *heldTransport) Held(uint32) (int, bool) {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	return 0, f.viewRetained
}

func (f *heldTransport) Refresh() error {
	f.vmu.Lock()
	f.viewRetained = f.peerRetained
	f.refreshes++
	g := f.gate
	f.gate = nil
	f.vmu.Unlock()
	if g != nil {
		resume := make(chan struct{})
		g <- resume
		<-resume
	}
	return nil
}

func (f *heldTransport) setPeer(retained bool) {
	f.vmu.Lock()
	f.peerRetained = retained
	f.vmu.Unlock()
}

// heldFlow is packed's rule: data moves only while the application calls
// in (AsyncFlush false), so nothing but the scheduler runs in this test.
type heldFlow struct{ schedFlow }

func (heldFlow) Buffered() bool   { return true }
func (heldFlow) AsyncFlush() bool { return false }

// TestFlushWaitRunsAgainForFlush: a flush that finds flushWait running
// leaves its round to it (flush returns 0) and may then sleep, as the
// progress goroutine does after the peer's space ring. flushWait must run
// that round: here the peer released its block after flushWait's view
// refresh, and the ring's flush came while flushWait still ran; without
// the second round the data waited for a ring that never came (the
// forkcore integration test's lost wakeup: 5 s idle, then the echo
// server's epoll_wait timed out).
func TestFlushWaitRunsAgainForFlush(t *testing.T) {
	f := &heldTransport{schedTransport: schedTransport{room: 64, space: make(chan struct{}, 1), done: make(chan struct{})}}
	c, err := NewChannel(f, ChannelConfig{Initiator: true, NewFlow: func() wire.FlowController { return heldFlow{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _ := c.Open()
	s.enter() // the application calls in for the whole test: held data may go
	defer s.leave()
	c.flushWait() // the stream's opening, if any, goes now
	before := len(f.log())

	f.vmu.Lock()
	f.peerRetained, f.viewRetained = true, true // as an earlier refresh saw it
	f.vmu.Unlock()
	s.mu.Lock()
	s.sendq = append(s.sendq, &chunk{b: []byte("held"), owned: true})
	s.queued += 4
	s.owned += 4
	s.activateLocked()
	s.mu.Unlock()

	gate := make(chan chan struct{})
	f.vmu.Lock()
	f.gate = gate
	f.vmu.Unlock()
	waited := make(chan struct{})
	go func() {
		c.flushWait() // paused: refreshes its view, which still shows the block retained
		close(waited)
	}()
	var resume chan struct{}
	select {
	case resume = <-gate:
	case <-time.After(muxTestWait):
		t.Fatal("flushWait did not refresh its view")
	}
	f.setPeer(false) // the peer releases its block: its space ring ...
	if n := c.flush(); n != 0 {
		t.Fatalf("flush sent %d blocks while flushWait held the scheduler", n)
	} // ... found the scheduler busy and left the round to flushWait
	close(resume)
	select {
	case <-waited:
	case <-time.After(muxTestWait):
		t.Fatal("flushWait did not return")
	}
	var data int
	for _, h := range f.log()[before:] {
		if h.Flags&wire.FlagData != 0 {
			data++
		}
	}
	if data != 1 {
		f.vmu.Lock()
		n := f.refreshes
		f.vmu.Unlock()
		t.Fatalf("%d data blocks sent after flushWait returned (view refreshed %d times), want 1: the flush it found waiting was lost", data, n)
	}
}

// muxTestWait bounds the waits of the hand-off tests.
const muxTestWait = 10 * time.Second
