package seed000

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Sync control latency: how long the sender of a full channel takes to
// learn that the receiver freed a block. The parent sends and the child
// receives, both polling. The child holds every block until the sender is
// full (it holds all N), waits syncSettle so that the sender is polling,
// notes the time and releases its oldest block; the parent notes the time
// its next TrySend succeeds. Status-byte: the sender's status READ sees the
// freed byte. Sliding window: the release moves the receiver's tail, the
// receiver SENDs an acknowledgement (the sender said it was full) and the
// sender takes it from its completion queue. One sample per release, each
// time difference taken on the shared monotonic clock.

// syncBlockSize is the block of the sync experiment: 64 bytes of payload.
const (
	syncBlockSize = 128
	syncPayload   = 64
	syncSettle    = 3 * time.Microsecond
)

// SyncResult is one transport's sync latency at one number of blocks.
type SyncResult struct {
	Transport string
	Blocks    int
	Lat       []time.Duration // one per synchronisation
	Reads     float64         // status READs per synchronisation (status-byte)
}

// syncLatency measures iters synchronisations of tr with blocks blocks.
func syncLatency(tr string, blocks, iters int) (SyncResult, error) {
	res := SyncResult{Transport: tr, Blocks: blocks}
	lc := LinkConfig{Transport: tr, Blocks: blocks, BlockSize: syncBlockSize}
	restore := setProcs(spinProcs)
	defer restore()
	pp, l, err := startPeer(job{Role: "sync-recv", Link: lc, Iters: iters, Procs: spinProcs})
	if err != nil {
		return res, err
	}
	defer l.close()
	deadline := time.Now().Add(time.Duration(iters)*time.Millisecond + 30*time.Second)
	p := make([]byte, syncPayload)
	send := func(seq int) error {
		return sendSpin(l, wire.BlockHeader{Stream: 1, Seq: uint32(seq), Flags: wire.FlagData}, p, deadline)
	}
	for i := 0; i < blocks; i++ {
		if err := send(i); err != nil {
			pp.kill()
			return res, err
		}
	}
	done := make([]int64, iters)
	reads0 := l.statusReads()
	for i := range done {
		if err := send(blocks + i); err != nil {
			pp.kill()
			return res, fmt.Errorf("sync %d: %w", i, err)
		}
		done[i] = monoNow()
	}
	reads := l.statusReads() - reads0
	rep, err := pp.finish(30 * time.Second)
	if err != nil {
		return res, err
	}
	if len(rep.Times) != iters {
		return res, fmt.Errorf("peer reported %d releases, want %d", len(rep.Times), iters)
	}
	res.Lat = make([]time.Duration, iters)
	for i, t := range done {
		res.Lat[i] = time.Duration(t - rep.Times[i])
	}
	res.Reads = float64(reads) / float64(iters)
	return res, nil
}

func init() {
	roles["sync-recv"] = syncRecv
}

// syncRecv is the child of syncLatency.
func syncRecv(j job, l *link) (report, error) {
	n := j.Link.Blocks
	deadline := time.Now().Add(time.Duration(j.Iters)*time.Millisecond + 30*time.Second)
	held := make([]wire.Block, 0, n)
	for len(held) < n {
		b, err := receiveSpin(l, deadline)
		if err != nil {
			return report{}, err
		}
		held = append(held, b)
	}
	rep := report{Times: make([]int64, j.Iters)}
	for i := range rep.Times {
		spinFor(syncSettle)
		rep.Times[i] = monoNow()
		l.Release(held[0])
		copy(held, held[1:])
		b, err := receiveSpin(l, deadline)
		if err != nil {
			return rep, fmt.Errorf("sync %d: %w", i, err)
		}
		held[n-1] = b
	}
	for _, b := range held {
		l.Release(b)
	}
	return rep, nil
}
