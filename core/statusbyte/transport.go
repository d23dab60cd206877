package statusbyte

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/doorbell"
	"github.com/sdpshim/sdpshim/core/setup"
	"github.com/sdpshim/sdpshim/core/verbs"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/core/wire"
)

var (
	_ wire.Transport    = (*Transport)(nil)
	_ wire.Retainer     = (*Transport)(nil)
	_ wire.BlockCounter = (*Transport)(nil)
	_ wire.BellPair     = (*Transport)(nil)
)

// Name is the transport's name in the setup exchange.
const Name = "statusbyte"

// Config configures one side; Blocks, BlockSize and Flow must match the
// peer's.
type Config struct {
	Blocks    int    // blocks per direction; 0 means 64
	BlockSize int    // bytes per block, header included, a multiple of 64; 0 means 64 KiB
	Flow      string // the flow controller's name, compared at setup
	// Backstop bounds each doorbell sleep (see doorbell.BellConfig); 0: none.
	Backstop time.Duration
	// Setup overrides the queue pair limits (MaxSend, MaxRings,
	// MaxInline); its other fields are ignored.
	Setup setup.SetupConfig
}

func (c *Config) normalize() error {
	if c.Blocks == 0 {
		c.Blocks = 64
	}
	if c.BlockSize == 0 {
		c.BlockSize = 64 << 10
	}
	if c.Blocks < 1 || c.Blocks > setup.MaxBlocks || c.BlockSize < align || c.BlockSize > setup.MaxBlockSize || c.BlockSize%align != 0 {
		return fmt.Errorf("statusbyte: %d blocks of %d bytes (want 1..%d blocks, 64..%d bytes in multiples of 64): %w",
			c.Blocks, c.BlockSize, setup.MaxBlocks, setup.MaxBlockSize, verbs.ErrInvalid)
	}
	return nil
}

// Transport is one side of a status-byte channel. Safe for concurrent use.
type Transport struct {
	lay     layout
	maxPay  int
	link    *setup.Link
	bells   *doorbell.Bells
	recv    verbs.Region // blocks and status bytes the peer writes into
	local   verbs.Region // staging block, READ landing area, scratch
	peer    verbs.RemoteRegion
	status  []byte // this side's status array (in recv)
	blocksM []byte // this side's blocks (in recv)

	smu sync.Mutex
	snd sender // +checklocks:smu

	rmu sync.Mutex
	rcv receiver // +checklocks:rmu

	closeOnce sync.Once
	closed    atomic.Bool
	stats     counters
}

// Open sets up a status-byte channel with the peer at the other end of the
// connected unix stream socket fd (see setup.Establish), which stays the
// caller's. Both sides call Open; it returns when both are connected, or
// an error (setup.ErrMismatch when the configs disagree) by deadline.
func Open(p verbs.Provider, fd int, cfg Config, deadline time.Time) (t *Transport, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	t = &Transport{lay: newLayout(cfg.Blocks, cfg.BlockSize), maxPay: cfg.BlockSize - wire.HeaderSize}
	defer func() {
		if err != nil {
			t.release()
			t = nil
		}
	}()
	if t.recv, err = p.RegisterRegion(t.lay.recvLen, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return t, fmt.Errorf("statusbyte: receive region: %w", err)
	}
	if t.local, err = p.RegisterRegion(t.lay.localLen, verbs.AccessLocalWrite); err != nil {
		return t, fmt.Errorf("statusbyte: local region: %w", err)
	}
	t.local.Bytes()[t.lay.oneOff] = 1
	scfg := cfg.Setup
	scfg.Transport, scfg.Flow, scfg.Blocks, scfg.BlockSize = Name, cfg.Flow, cfg.Blocks, cfg.BlockSize
	var peerBlob []byte
	t.link, peerBlob, err = setup.Establish(fd, p, scfg, encodeBlob(t.recv.Remote(), t.lay), deadline)
	if err != nil {
		return t, err
	}
	if t.peer, err = decodeBlob(peerBlob, t.lay); err != nil {
		return t, err
	}
	rb := t.recv.Bytes()
	peerBoard := t.peer
	peerBoard.Len = uint64(doorbell.BellBoardSize(numBells))
	t.bells, err = doorbell.NewBells(doorbell.BellConfig{
		Link: t.link, Bells: numBells, Board: rb[t.lay.boardOff : t.lay.boardOff+doorbell.BellBoardSize(numBells)],
		PeerBoard: peerBoard, Scratch: t.local, ScratchOff: t.lay.scratchOff, Backstop: cfg.Backstop,
	})
	if err != nil {
		return t, err
	}
	t.status = rb[t.lay.statusOff : t.lay.statusOff+roundUp(t.lay.blocks, align)]
	t.blocksM = rb[t.lay.blocksOff:t.lay.recvLen]
	t.snd.init(t.lay.blocks)
	t.rcv.init(t.lay.blocks)
	return t, nil
}

// MaxPayload returns BlockSize minus the header.
func (t *Transport) MaxPayload() int { return t.maxPay }

// Blocks returns the number of blocks per direction.
func (t *Transport) Blocks() int { return t.lay.blocks }

// Initiator reports the side's role from setup (setup.Link.Initiator).
func (t *Transport) Initiator() bool { return t.link.Initiator }

// DataBell returns a new handle on the doorbell rung when the peer sends.
func (t *Transport) DataBell() wait.Doorbell { return t.bells.Doorbell(bellData) }

// SpaceBell returns a new handle on the doorbell rung when the peer
// releases a block.
func (t *Transport) SpaceBell() wait.Doorbell { return t.bells.Doorbell(bellSpace) }

// Link returns the transport's link (for state queries and tests).
func (t *Transport) Link() *setup.Link { return t.link }

// Close tells the peer (its waits end, its Receive reports the end after
// the blocks already arrived) and releases the link and regions. Payloads
// of unreleased blocks become invalid. Safe to call more than once.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		if t.bells != nil {
			t.bells.Close()
		}
		t.smu.Lock()
		t.rmu.Lock()
		t.snd.fail(fmt.Errorf("statusbyte: %w", verbs.ErrClosed))
		t.rcv.fail(fmt.Errorf("statusbyte: %w", verbs.ErrClosed))
		t.release()
		t.rmu.Unlock()
		t.smu.Unlock()
	})
	return nil
}

// release frees what Open created.
func (t *Transport) release() {
	if t.link != nil {
		t.link.Close()
	}
	for _, r := range []verbs.Region{t.recv, t.local} {
		if r != nil {
			r.Close()
		}
	}
}

// Stats are a transport's counters.
type Stats struct {
	BlocksSent, BlocksReceived uint64
	StatusReads                uint64 // READs of the peer's status array
	SkippedRetained            uint64 // slots passed over because the peer retains them
	SendFull                   uint64 // TrySend calls that found no room after a READ
	BlocksReleased             uint64 // received blocks released (BlocksReceived less these are in use)
	BellRings                  uint64 // doorbell rings posted to the peer (only when it armed)
}

type counters struct {
	sent, received, reads, skipped, full, released atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats {
	return Stats{
		BlocksSent: t.stats.sent.Load(), BlocksReceived: t.stats.received.Load(),
		StatusReads: t.stats.reads.Load(), SkippedRetained: t.stats.skipped.Load(), SendFull: t.stats.full.Load(),
		BlocksReleased: t.stats.released.Load(), BellRings: t.bells.RingsPosted(),
	}
}

// Bells returns a new handle on the data and/or space doorbells
// (wire.BellPair): one sleeper for both.
func (t *Transport) Bells(data, space bool) wait.Doorbell {
	var ids []int
	if data {
		ids = append(ids, bellData)
	}
	if space {
		ids = append(ids, bellSpace)
	}
	return t.bells.Doorbell(ids...)
}

// Interrupt ends the sleeps in progress on the doorbells (wire.BellPair).
func (t *Transport) Interrupt() { t.bells.Interrupt() }
