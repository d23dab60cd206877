package doorbell

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/sharedmem"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

// Bells are the doorbells of one Link (the wait.Doorbell contract
// over a provider). Each side has a board, BellBoardSize bytes of a region
// its peer may write, laid out in 8-byte little-endian words for n bells:
//
//	word i        (i < n) the peer's arm token for the peer's bell i
//	word n        nonzero once the peer closed its side
//	word n+1+i    landing word of the rings of this side's bell i
//
// A side sleeping on its bell i arms by writing a fresh token into word i
// of the peer's board (a one-sided WRITE on Link.Data, waited for until
// visible), checks its condition again, and sleeps on the Link's
// BellRecvCQ; a Disarm of the last armed handle writes 0 back. The peer,
// after it made progress, calls Ring(i): a fence, a local atomic load of
// word i of its own board, and only when the word holds a token it has
// not rung for yet, a WRITE_WITH_IMM (imm i+1) on Link.Bell
// that consumes one of the receives the sleeper keeps posted. Arm, check,
// sleep loses no wakeup: the arm is visible before the check, progress is
// visible before the ringer's load, and both sides fence in between.
//
// Ring requires that the progress it announces is visible at the peer:
// post it on Link.Data with visible set, or on a provider that runs
// one-sided work at post time (shm) unsignaled.
type Bells struct {
	link     *setup.Link
	n        int
	board    []byte
	peer     verbs.RemoteRegion
	scratch  verbs.Region
	scratchO int
	backstop time.Duration

	lastRung [maxBells]atomic.Uint64 // ringer side: token last rung for, per bell
	// gone is set (under postMu) once Close has returned: the scratch
	// region and the boards may be unmapped by their owner from then on,
	// so nothing may touch them (a sleeper's Disarm after the close).
	gone   atomic.Bool
	tokens atomic.Uint64
	posted atomic.Uint64 // rings posted (RingsPosted)

	postMu sync.Mutex // serialises the posts and the armed count
	wr     verbs.SendRequest
	sge    [1]verbs.SGE
	armers int // handles armed and not yet disarmed or woken; +checklocks:postMu

	mu     sync.Mutex
	rung   [maxBells]uint64 // rings received per bell; +checklocks:mu
	err    error            // what ended the bells; +checklocks:mu
	closed bool             // Close called; +checklocks:mu
	leader bool             // a sleeper polls the notification fd; +checklocks:mu
	wake   chan struct{}    // closed when rung or err changes; +checklocks:mu
	active int              // goroutines in Sleep; +checklocks:mu
	ints   uint64           // Interrupt calls; +checklocks:mu
	quiet  *sync.Cond       // on mu: active dropped to 0 after Close
	// The leader waits for the notification and for kicks (Interrupt,
	// Close): an in-process queue's notifications (NotifyChanner) on
	// notifyCh, kicks on kickCh (kickFD is then -1); any other queue's on
	// its notification fd, kicks on the eventfd kickFD, both in the epoll
	// set park (nil: poll(2) on the two).
	kickFD    int
	park      *wait.ParkFD
	parkEv    [2]unix.EpollEvent // park's events, discarded (one leader at a time)
	notifyCh  <-chan struct{}
	kickCh    chan struct{}
	leadTimer *time.Timer          // the leader's wait limit (one leader at a time)
	cbuf      [16]verbs.Completion // +checklocks:mu
	rbuf      verbs.RecvRequest    // +checklocks:mu
	rsge      [1]verbs.SGE         // +checklocks:mu
	msgs      verbs.Region         // landing slots of messages, or nil
	msgOff    int
	onMsg     func(c verbs.Completion, payload []byte) error
}

const (
	maxBells = 8
	closeImm = 0xC105ED
)

// BellBoardSize returns the size of a board for n bells.
func BellBoardSize(n int) int { return 8 * (2*n + 1) }

// BellScratchSize is the local registered memory Bells needs for the
// sources of its inline writes.
const BellScratchSize = 16

// BellConfig describes one side's Bells.
type BellConfig struct {
	Link  *setup.Link
	Bells int    // number of bells, 1..8, the same on both sides
	Board []byte // this side's board: BellBoardSize(Bells) bytes, 8-aligned, peer-writable
	// PeerBoard addresses the peer's board: Key, Addr of its first byte,
	// Len at least BellBoardSize(Bells).
	PeerBoard verbs.RemoteRegion
	// Scratch and ScratchOff name BellScratchSize bytes of local memory,
	// 8-aligned, that nothing else uses.
	Scratch    verbs.Region
	ScratchOff int
	// Backstop, when positive, bounds each sleep: Sleep then returns nil
	// after it without a ring, and the caller checks its condition again.
	// A safety net for providers that do not run one-sided work at post
	// time; 0 means none.
	Backstop time.Duration

	// OnMessage, when set, receives what arrives on the doorbell queue
	// pair that is not a ring: SENDs (with up to MessageSize payload bytes,
	// which land in Messages at MessagesOff, MessageSize bytes per posted
	// receive) and WRITE_WITH_IMMs whose imm is not a bell's. Transports
	// that announce or acknowledge with small messages (the sliding
	// window) use it. It is called with the bells' lock held: it must not
	// Arm, Sleep or Interrupt (Ring is fine) and must not block; an error
	// ends the bells with it. Without OnMessage such arrivals are protocol
	// violations.
	OnMessage   func(c verbs.Completion, payload []byte) error
	Messages    verbs.Region // local-write region holding MessageSize bytes per doorbell receive
	MessagesOff int
}

// MessageSize is the payload one doorbell receive takes (see
// BellConfig.OnMessage); a Link has Link.Rings receives.
const MessageSize = 8

// NewBells posts the doorbell receives on cfg.Link.Bell and returns the
// side's Bells. Call it once per Link, before the peer may ring (that is,
// before this side first arms or Establish's peer can see this side).
func NewBells(cfg BellConfig) (*Bells, error) {
	n := cfg.Bells
	if cfg.Link == nil || n < 1 || n > maxBells || len(cfg.Board) != BellBoardSize(n) ||
		cfg.PeerBoard.Len < uint64(BellBoardSize(n)) || cfg.Link.MaxInline < 8 ||
		cfg.Scratch == nil || cfg.ScratchOff < 0 || cfg.ScratchOff%8 != 0 ||
		cfg.ScratchOff+BellScratchSize > len(cfg.Scratch.Bytes()) {
		return nil, fmt.Errorf("doorbell: bad config: %w", verbs.ErrInvalid)
	}
	if cfg.Messages != nil && (cfg.MessagesOff < 0 || cfg.MessagesOff+MessageSize*cfg.Link.Rings() > len(cfg.Messages.Bytes())) {
		return nil, fmt.Errorf("doorbell: message area too small: %w", verbs.ErrInvalid)
	}
	b := &Bells{
		link: cfg.Link, n: n, board: cfg.Board, peer: cfg.PeerBoard,
		scratch: cfg.Scratch, scratchO: cfg.ScratchOff, backstop: cfg.Backstop,
		wake: make(chan struct{}), kickFD: -1,
		msgs: cfg.Messages, msgOff: cfg.MessagesOff, onMsg: cfg.OnMessage,
	}
	b.quiet = sync.NewCond(&b.mu)
	if nc, ok := cfg.Link.BellRecvCQ.(verbs.NotifyChanner); ok {
		b.notifyCh, b.kickCh = nc.NotifyChan(), make(chan struct{}, 1)
	} else {
		kick, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return nil, fmt.Errorf("doorbell: eventfd: %w", err)
		}
		fdhook.NoteFDs(kick)
		b.kickFD = kick
		b.park = newBellPark(cfg.Link.BellRecvCQ.NotifyFD(), kick, b.parkReady)
	}
	sharedmem.Uint64At(b.board, 0) // panics now, not later, on a misaligned board
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < cfg.Link.Rings(); i++ {
		if err := b.postRecvLocked(uint64(i)); err != nil {
			b.closeKick()
			return nil, fmt.Errorf("doorbell: post receive: %w", err)
		}
	}
	return b, nil
}

// postRecvLocked posts doorbell receive id (its message slot, if any).
//
// +checklocks:b.mu
func (b *Bells) postRecvLocked(id uint64) error {
	b.rbuf = verbs.RecvRequest{ID: id}
	if b.msgs != nil {
		b.rsge[0] = verbs.SGE{Key: b.msgs.LocalKey(), Offset: uint64(b.msgOff) + MessageSize*id, Length: MessageSize}
		b.rbuf.SGEs = b.rsge[:]
	}
	_, err := b.link.Bell.PostRecv(&b.rbuf)
	return err
}

// Doorbell returns a new handle on this side's bells ids: its Arm arms
// each of them and its Sleep ends when any rings. A handle serves one
// waiter at a time; several goroutines sleep on the same bells with a
// handle each.
func (b *Bells) Doorbell(ids ...int) wait.Doorbell {
	h := &bellHandle{b: b}
	for _, id := range ids {
		if id < 0 || id >= b.n {
			panic("core: doorbell id out of range")
		}
		h.mask |= 1 << id
	}
	return h
}

// Ring wakes the peer's sleepers on bell id if the peer armed it since
// the last ring: cheap (a fence and a local load) when it did not. It
// returns the link's error when a ring could not be posted (an error
// wrapping ErrProtocol when the peer takes no rings).
func (b *Bells) Ring(id int) error {
	if b.gone.Load() {
		return nil
	}
	sharedmem.Fence()
	tok := sharedmem.Uint64At(b.board, 8*id).Load()
	last := b.lastRung[id].Load()
	if tok == 0 || tok == last || !b.lastRung[id].CompareAndSwap(last, tok) {
		return nil
	}
	b.posted.Add(1)
	return b.ring(id, tok, uint32(id+1))
}

// RingsPosted returns how many rings this side posted to its peer: Ring
// calls that found the bell armed (the others cost a fence and a load).
func (b *Bells) RingsPosted() uint64 { return b.posted.Load() }

// ring posts one WRITE_WITH_IMM carrying tok to the peer's landing word.
func (b *Bells) ring(id int, tok uint64, imm uint32) error {
	b.postMu.Lock()
	defer b.postMu.Unlock()
	if b.gone.Load() {
		return fmt.Errorf("doorbell: %w", verbs.ErrClosed)
	}
	binary.LittleEndian.PutUint64(b.scratch.Bytes()[b.scratchO+8:], tok)
	b.wr = verbs.SendRequest{
		Op: verbs.OpWriteWithImm, Flags: verbs.SendInline, Imm: imm,
		SGEs:       b.sgeAt(8),
		RemoteAddr: b.peer.Addr + uint64(8*(b.n+1+id)), RemoteKey: b.peer.Key,
	}
	err := b.link.PostBell(&b.wr)
	if err != nil && errors.Is(err, verbs.ErrQueueFull) {
		return fmt.Errorf("doorbell: peer takes no rings: %v: %w", err, wire.ErrProtocol)
	}
	return err
}

// writeLocked posts an 8-byte inline WRITE of v to word w of the peer's
// board and waits until it is visible there.
//
// +checklocks:b.postMu
func (b *Bells) writeLocked(w int, v uint64) error {
	if b.gone.Load() {
		return fmt.Errorf("doorbell: %w", verbs.ErrClosed)
	}
	binary.LittleEndian.PutUint64(b.scratch.Bytes()[b.scratchO:], v)
	b.wr = verbs.SendRequest{
		Op: verbs.OpWrite, Flags: verbs.SendInline, SGEs: b.sgeAt(0),
		RemoteAddr: b.peer.Addr + uint64(8*w), RemoteKey: b.peer.Key,
	}
	return b.link.PostData(&b.wr, true)
}

// +checklocks:b.postMu
func (b *Bells) sgeAt(off int) []verbs.SGE {
	b.sge[0] = verbs.SGE{Key: b.scratch.LocalKey(), Offset: uint64(b.scratchO + off), Length: 8}
	return b.sge[:]
}

// PeerClosed reports whether the peer has closed its side (its Close
// wrote the closed word of this side's board).
func (b *Bells) PeerClosed() bool { return sharedmem.Uint64At(b.board, 8*b.n).Load() != 0 }
