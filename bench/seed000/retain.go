package seed000

import (
	"fmt"
	"time"

	"github.com/sdpshim/sdpshim/core/wire"
)

// The retained-block timeline: the parent streams full blocks of one
// stream as fast as it can; the child copies each block out and releases
// it, except that the first block landing in slot retainSlot at or after
// retainFrom is held until retainTo (status-byte: marked retained, status
// 2, and the sender skips its slot; sliding window: simply not released,
// and since space comes back only in order the ring stops behind it).
// The child counts the payload bytes it receives per retainBin from its
// first block.

// The paper's timeline: block 3 retained from 100 ms to 200 ms, 10 ms bins.
const (
	retainSlot   = 3
	retainFrom   = 100 * time.Millisecond
	retainTo     = 200 * time.Millisecond
	retainRun    = 300 * time.Millisecond
	retainBin    = 10 * time.Millisecond
	retainBlocks = 8
)

// retainLink is the shape of the timeline's channel: 8 blocks of 64 KiB.
var retainLink = LinkConfig{Blocks: retainBlocks, BlockSize: 64<<10 + 64}

// RetainResult is one transport's timeline.
type RetainResult struct {
	Transport string
	Rates     []float64 // MB/s per bin
}

// Phase returns the mean rate over bins [from, to) of the timeline.
func (r RetainResult) Phase(from, to time.Duration) float64 {
	a, b := int(from/retainBin), min(int(to/retainBin), len(r.Rates))
	if a >= b {
		return 0
	}
	m, _ := meanStd(r.Rates[a:b])
	return m
}

// retainTimeline runs the timeline over tr.
func retainTimeline(tr string) (RetainResult, error) {
	res := RetainResult{Transport: tr}
	lc := retainLink
	lc.Transport = tr
	j := job{Role: "retain-recv", Link: lc, Procs: spinProcs,
		Run: int64(retainRun), From: int64(retainFrom), To: int64(retainTo), Slot: retainSlot, Bin: int64(retainBin)}
	restore := setProcs(spinProcs)
	defer restore()
	pp, l, err := startPeer(j)
	if err != nil {
		return res, err
	}
	defer l.close()
	p := make([]byte, l.MaxPayload())
	for i := range p {
		p[i] = byte(i)
	}
	// Stream until the child has surely stopped counting; a TrySend that
	// finds no room is retried (the sender is stalled, not failed).
	end := time.Now().Add(retainRun + 100*time.Millisecond)
	var y yielder
	for seq, n := 0, 1; time.Now().Before(end); n++ {
		ok, err := l.TrySend(wire.BlockHeader{Stream: 1, Seq: uint32(seq), Flags: wire.FlagData}, p)
		if err != nil {
			break // the child finished and closed
		}
		if ok {
			seq, y = seq+1, yielder{}
		} else {
			y.poll(n)
		}
	}
	rep, err := pp.finish(30 * time.Second)
	if err != nil {
		return res, err
	}
	res.Rates = binRates(rep.Bins, retainBin)
	return res, nil
}

func init() {
	roles["retain-recv"] = retainRecv
}

// retainRecv is the child of retainTimeline.
func retainRecv(j job, l *link) (report, error) {
	rep := report{Bins: make([]int64, j.Run/j.Bin)}
	sink := make([]byte, l.MaxPayload())
	var held wire.Block
	holding, done := false, false
	retainer, _ := l.Transport.(wire.Retainer)
	giveUp := time.Now().Add(setupTimeout)
	var start int64
	var y yielder
	for polls := 1; ; polls++ {
		now := monoNow()
		if start != 0 && holding && now-start >= j.To {
			l.Release(held)
			holding = false
		}
		if start != 0 && now-start >= j.Run {
			break
		}
		b, ok, err := l.Receive()
		if err != nil {
			return rep, err
		}
		if !ok {
			y.poll(polls)
			if start == 0 && time.Now().After(giveUp) {
				return rep, fmt.Errorf("no block arrived")
			}
			continue
		}
		if start == 0 {
			start = now
		}
		y = yielder{}
		copy(sink, b.Payload)
		binAdd(rep.Bins, monoNow()-start, j.Bin, int64(len(b.Payload)))
		if !done && b.Index == j.Slot && now-start >= j.From {
			held, holding, done = b, true, true
			if retainer != nil {
				retainer.Retain(b)
			}
			continue
		}
		l.Release(b)
	}
	if holding {
		l.Release(held)
	}
	return rep, nil
}
