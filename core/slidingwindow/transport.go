package slidingwindow

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Not a wire.BlockCounter on purpose: acknowledgements are coalesced,
// so the sender's count of a stream's held blocks lags, and a per-stream
// cap on top of it could wait for an acknowledgement the policy never
// sends (the sender is not full, so it never asks for one). Not a
// wire.Retainer either: see the package documentation.
var _ wire.Transport = (*Transport)(nil)

// Transport is one side of a sliding-window channel. Safe for concurrent
// use. Lock order: smu before mu.
type Transport struct {
	n, size, maxPay int
	ackEvery        int
	rings           int // receives kept posted (IDs 0..rings-1), the doorbell queues' depth
	backstop        time.Duration
	link            *setup.Link
	ring            verbs.Region // the blocks the peer writes into
	local           verbs.Region // receive landing slots, message scratch, staging copies
	peer            verbs.RemoteRegion
	ringM           []byte
	kickFD          int // wakes the leading sleeper at Close

	smu sync.Mutex
	snd sender // +checklocks:smu

	mu    sync.Mutex
	rcv   receiver          // +checklocks:mu
	cq    cqState           // +checklocks:mu
	slp   sleepers          // +checklocks:mu
	err   error             // what ended the transport; +checklocks:mu
	bad   bool              // err is a protocol violation: deliver nothing more; +checklocks:mu
	rr    [1]verbs.SGE      // +checklocks:mu
	msgWR verbs.SendRequest // +checklocks:mu

	// sent is the sender's head, published before each write is posted so
	// an acknowledgement is never checked against a stale head; tail is
	// the sender's tail, written under mu by acknowledgements. ended is
	// set once err is.
	sent, tail atomic.Uint64
	ended      atomic.Bool

	closeOnce sync.Once
	stats     counters
}

// Local region layout: msgSize-byte landing slots for the receives, the
// message scratch (source of inline SENDs, used under mu), the staging
// copies of the blocks (a copy is reused only after the peer released the
// block, that is after its write executed).
func (t *Transport) landOff(i int) int { return i * msgSize }
func (t *Transport) scratchOff() int   { return t.rings * msgSize }
func (t *Transport) stageOff(slot int) int {
	return roundUp(t.scratchOff()+msgSize, 64) + slot*t.size
}

func roundUp(n, a int) int { return (n + a - 1) / a * a }

// Open sets up a sliding-window channel with the peer at the other end of
// the connected unix stream socket fd (see setup.Establish), which stays
// the caller's. Both sides call Open; it returns when both are connected,
// or an error (setup.ErrMismatch when the configs disagree) by deadline.
func Open(p verbs.Provider, fd int, cfg Config, deadline time.Time) (t *Transport, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	n, size := cfg.Blocks, cfg.BlockSize
	t = &Transport{n: n, size: size, maxPay: size - wire.HeaderSize, ackEvery: max(1, n/4),
		backstop: cfg.Backstop, kickFD: -1}
	t.rings = queueDepth(n)
	defer func() {
		if err != nil {
			t.release()
			t = nil
		}
	}()
	if t.kickFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return t, fmt.Errorf("slidingwindow: eventfd: %w", err)
	}
	fdhook.NoteFDs(t.kickFD)
	if t.ring, err = p.RegisterRegion(n*size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return t, fmt.Errorf("slidingwindow: ring region: %w", err)
	}
	if t.local, err = p.RegisterRegion(t.stageOff(n), verbs.AccessLocalWrite); err != nil {
		return t, fmt.Errorf("slidingwindow: local region: %w", err)
	}
	scfg := cfg.Setup
	scfg.Transport, scfg.Flow, scfg.Blocks, scfg.BlockSize = Name, cfg.Flow, n, size
	scfg.MaxRings = max(scfg.MaxRings, t.rings)
	var peerBlob []byte
	t.link, peerBlob, err = setup.Establish(fd, p, scfg, encodeBlob(t.ring.Remote(), n, size), deadline)
	if err != nil {
		return t, err
	}
	if t.peer, err = decodeBlob(peerBlob, n, size); err != nil {
		return t, err
	}
	t.ringM = t.ring.Bytes()[:n*size]
	t.rcv.init(n)
	t.slp.init(&t.mu)
	if err = t.postReceives(); err != nil {
		return t, err
	}
	return t, nil
}

// postReceives posts the receives every write and message consumes, one
// landing slot each (the peer's writes wait, receiver not ready, until
// they are posted).
func (t *Transport) postReceives() error {
	reqs := make([]verbs.RecvRequest, t.rings)
	sges := make([]verbs.SGE, t.rings)
	for i := range reqs {
		sges[i] = verbs.SGE{Key: t.local.LocalKey(), Offset: uint64(t.landOff(i)), Length: msgSize}
		reqs[i] = verbs.RecvRequest{ID: uint64(i), SGEs: sges[i : i+1 : i+1]}
		if i+1 < len(reqs) {
			reqs[i].Next = &reqs[i+1]
		}
	}
	if _, err := t.link.Bell.PostRecv(&reqs[0]); err != nil {
		return fmt.Errorf("slidingwindow: post receives: %w", err)
	}
	return nil
}

// MaxPayload returns BlockSize minus the header.
func (t *Transport) MaxPayload() int { return t.maxPay }

// Blocks returns the number of blocks per direction.
func (t *Transport) Blocks() int { return t.n }

// Initiator reports the side's role from setup (setup.Link.Initiator).
func (t *Transport) Initiator() bool { return t.link.Initiator }

// Link returns the transport's link (for state queries and tests).
func (t *Transport) Link() *setup.Link { return t.link }

// Close tells the peer (its waits end with wire.ErrPeerGone, its Receive
// reports the end after the blocks already arrived), ends this side's
// waits with verbs.ErrClosed and releases the link and regions. Payloads of
// unreleased blocks become invalid. Safe to call more than once.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		if t.err == nil {
			t.sendMsgLocked(msgClose, 0)
		}
		t.failLocked(fmt.Errorf("slidingwindow: %w", verbs.ErrClosed), false)
		t.slp.closing = true
		unix.Write(t.kickFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		t.slp.waitQuietLocked()
		t.mu.Unlock()
		// No sleeper is left and every new call sees err: wait for a send
		// in progress, then free what it might touch.
		t.smu.Lock()
		t.mu.Lock()
		t.cq.closed = true
		t.release()
		t.mu.Unlock()
		t.smu.Unlock()
	})
	return nil
}

// release frees what Open created.
func (t *Transport) release() {
	if t.link != nil {
		t.link.Close()
	}
	for _, r := range []verbs.Region{t.ring, t.local} {
		if r != nil {
			r.Close()
		}
	}
	if t.kickFD >= 0 {
		fdhook.CloseFD(t.kickFD)
		t.kickFD = -1
	}
}

// failLocked ends the transport with err unless it already ended; bad
// marks a protocol violation, after which nothing more is delivered.
//
// +checklocks:t.mu
func (t *Transport) failLocked(err error, bad bool) {
	if t.err != nil {
		return
	}
	t.err, t.bad = err, bad
	t.ended.Store(true)
	t.slp.broadcastLocked()
}

// failed returns the error that ended the transport, or nil.
func (t *Transport) failed() error {
	if !t.ended.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
