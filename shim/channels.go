package shim

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sdpshim/sdpshim/core/mux"
)

// Channels. One channel per pair of processes carries every stream
// between them (SDPSHIM_CHANNEL=per-connection: one channel per
// connection). A channel has two ends, one in each process (both in this
// one when a process connects to itself). An end is known by
//   - its token: a random 64-bit number the connector of the channel's
//     first connection drew, the same at both ends, plus its role (dialer:
//     the end of the process that made the channel; the other end is the
//     listener end). An offer names the token and the role of the sender's
//     end; the acceptor looks up the other role.
//   - its peer: the process at the other end (pid and start time), so a
//     later connect to that process in either direction reuses it.
//
// Streams: for every accelerated connection the acceptor opens the stream
// (in the rendezvous Handler, on its end) and answers with the stream's
// id; the stream is announced to the connector's end by its first block.
// The connector takes that id from its end's arrivals once the acceptor's
// verdict says accepted, and discards it otherwise.
type channelEnd struct {
	ch     *mux.Channel
	token  uint64
	dialer bool
	peer   procID

	mu      sync.Mutex
	arrived map[uint32]*mux.Stream // +checklocks:mu; announced, not taken yet
	discard map[uint32]time.Time   // +checklocks:mu; ids given up before they arrived
}

type endKey struct {
	token  uint64
	dialer bool
}

// channelTable indexes the process's channel ends.
type channelTable struct {
	mu      sync.Mutex
	byToken map[endKey]*channelEnd // +checklocks:mu
	byPeer  map[procID]*channelEnd // +checklocks:mu
	dialing map[procID]*sync.Mutex // +checklocks:mu; one channel creation per peer at a time
}

func (t *channelTable) init() {
	t.byToken = map[endKey]*channelEnd{}
	t.byPeer = map[procID]*channelEnd{}
	t.dialing = map[procID]*sync.Mutex{}
}

// add files a new end of a shared channel (per-connection channels are
// never reused and not filed). Dead ends are removed when a lookup meets
// them.
func (t *channelTable) add(e *channelEnd) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byToken[endKey{e.token, e.dialer}] = e
	if old := t.byPeer[e.peer]; old == nil || old.ch.Err() != nil {
		t.byPeer[e.peer] = e
	}
}

// remove forgets e.
func (t *channelTable) remove(e *channelEnd) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byToken[endKey{e.token, e.dialer}] == e {
		delete(t.byToken, endKey{e.token, e.dialer})
	}
	if t.byPeer[e.peer] == e {
		delete(t.byPeer, e.peer)
	}
}

// forPeer returns a live end to peer, or nil.
func (t *channelTable) forPeer(peer procID) *channelEnd {
	t.mu.Lock()
	e := t.byPeer[peer]
	t.mu.Unlock()
	if e != nil && e.ch.Err() != nil {
		t.remove(e)
		return nil
	}
	return e
}

// byOffer returns the live end an offer naming (token, sender's role)
// means at this side, or nil.
func (t *channelTable) byOffer(token uint64, senderDialer bool) *channelEnd {
	t.mu.Lock()
	e := t.byToken[endKey{token, !senderDialer}]
	t.mu.Unlock()
	if e != nil && e.ch.Err() != nil {
		t.remove(e)
		return nil
	}
	return e
}

// dialLock returns the lock that serialises channel creation to peer.
func (t *channelTable) dialLock(peer procID) *sync.Mutex {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.dialing[peer]
	if m == nil {
		m = new(sync.Mutex)
		t.dialing[peer] = m
	}
	return m
}

// all returns every end.
func (t *channelTable) all() []*channelEnd {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*channelEnd, 0, len(t.byToken))
	for _, e := range t.byToken {
		out = append(out, e)
	}
	return out
}

// errNoStream: the announced stream never arrived.
var errNoStream = errors.New("announced stream did not arrive")

// take returns the stream id the peer opened on e, waiting until deadline
// for its announcement (normally there already: the acceptor opened the
// stream before it answered). Streams of other ids that arrive meanwhile
// are kept for their own takers, or closed when given up.
func (e *channelEnd) take(id uint32, deadline time.Time) (*mux.Stream, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if s := e.arrived[id]; s != nil {
			delete(e.arrived, id)
			return s, nil
		}
		s, err := e.ch.Accept(deadline)
		if err != nil {
			return nil, fmt.Errorf("stream %d: %w (%w)", id, errNoStream, err)
		}
		e.fileLocked(s)
	}
}

// fileLocked keeps an arrived stream for its taker, or closes it when it
// was given up.
//
// +checklocks:e.mu
func (e *channelEnd) fileLocked(s *mux.Stream) {
	if _, gone := e.discard[s.ID()]; gone {
		delete(e.discard, s.ID())
		s.Close()
		return
	}
	if e.arrived == nil {
		e.arrived = map[uint32]*mux.Stream{}
	}
	e.arrived[s.ID()] = s
}

// giveUp discards stream id: closed now if it arrived, else when it does.
// Stale discard marks (older than a minute) are forgotten.
func (e *channelEnd) giveUp(id uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.arrived[id]; s != nil {
		delete(e.arrived, id)
		s.Close()
		return
	}
	if e.discard == nil {
		e.discard = map[uint32]time.Time{}
	}
	now := time.Now()
	for k, t := range e.discard {
		if now.Sub(t) > time.Minute {
			delete(e.discard, k)
		}
	}
	e.discard[id] = now
}
