package flowcontrol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// link is the in-test model of one direction of a stream: the sending
// end's controller, a channel of at most slots blocks (a slot frees when
// the reader consumes its block), the receiving end's controller, and the
// control records on their way back. It checks every answer the controllers
// give against a trivial model of what the algorithm allows.
type link struct {
	tb       testing.TB
	name     string
	p        flowcontrol.Params
	slots    int // channel blocks
	sendBuf  int // bytes a Buffered stream may hold
	snd, rcv wire.FlowController

	written   []byte // every byte the application wrote
	queued    int    // bytes of written not yet in blocks (its tail)
	writes    []int  // lengths of the queued writes, oldest first
	channel   [][]byte
	records   []wire.ControlRecord
	delivered []byte

	// The model's accounting.
	blocksSent, bytesSent, coalesced uint64
	credited                         uint64 // credits the sender took back
	windowGot                        uint64 // window bytes the sender took
	windowPosted, consumed           uint64 // receiving side, bytes
}

func newLink(tb testing.TB, name string, p flowcontrol.Params, slots int) *link {
	tb.Helper()
	mk, err := flowcontrol.New(name, p)
	if err != nil {
		tb.Fatalf("New(%q, %+v): %v", name, p, err)
	}
	l := &link{tb: tb, name: name, p: p, slots: slots, sendBuf: 4 * p.ReceiveCapacity, snd: mk(), rcv: mk()}
	for _, c := range []wire.FlowController{l.snd, l.rcv} {
		if c.Name() != name {
			tb.Fatalf("Name() = %q, want %q", c.Name(), name)
		}
	}
	for _, rec := range l.rcv.Open() {
		l.windowPosted += uint64(rec.Value)
		l.records = append(l.records, rec)
	}
	if len(l.records) > 0 != (name == flowcontrol.NameNICAssist) {
		tb.Fatalf("%s: Open returned %v", name, l.records)
	}
	return l
}

// write queues an application write of up to m bytes: a Buffered stream
// takes what fits its send buffer; an unbuffered one is still blocked in
// its previous write while bytes are queued.
func (l *link) write(m int) bool {
	if !l.snd.Buffered() && l.queued > 0 {
		return false
	}
	m = min(m, l.sendBuf-l.queued)
	if m <= 0 {
		return false
	}
	for range m {
		i := uint64(len(l.written))
		l.written = append(l.written, byte((i*0x9E3779B97F4A7C15)>>56))
	}
	l.queued += m
	l.writes = append(l.writes, m)
	return true
}

// send offers the head of the queue to the sender's controller and puts
// the block in the channel if a slot is free.
func (l *link) send() bool {
	if l.queued == 0 {
		return false
	}
	maxPayload, msg := l.p.BlockPayload, l.writes[0]
	n := l.snd.NextSegment(l.queued, msg, maxPayload)
	if n < 0 || n > min(l.queued, maxPayload) {
		l.tb.Fatalf("%s: NextSegment(%d, %d, %d) = %d", l.name, l.queued, msg, maxPayload, n)
	}
	switch l.name {
	case flowcontrol.NameCredit:
		if n > msg {
			l.tb.Fatalf("credit: NextSegment = %d spans writes (msg %d)", n, msg)
		}
		if l.blocksSent-l.credited < uint64(l.p.Credits) && n == 0 {
			l.tb.Fatalf("credit: stalled with %d of %d credits used", l.blocksSent-l.credited, l.p.Credits)
		}
	case flowcontrol.NamePacked:
		if n != min(l.queued, maxPayload) {
			l.tb.Fatalf("packed: NextSegment(%d, %d, %d) = %d", l.queued, msg, maxPayload, n)
		}
	case flowcontrol.NameNICAssist:
		if want := min(uint64(l.queued), uint64(maxPayload), l.windowGot-l.bytesSent); uint64(n) != want {
			l.tb.Fatalf("nicassist: NextSegment = %d, want %d", n, want)
		}
	}
	if n == 0 || len(l.channel) == l.slots {
		return false // no credit or window; or the channel is full
	}
	off := len(l.written) - l.queued
	blk := l.written[off : off+n]
	l.channel = append(l.channel, blk)
	l.snd.Sent(n)
	if err := l.rcv.Arrived(n); err != nil {
		l.tb.Fatalf("%s: Arrived(%d) of a block within bounds: %v", l.name, n, err)
	}
	l.blocksSent++
	l.bytesSent += uint64(n)
	l.coalesced += uint64(max(0, n-msg))
	l.queued -= n
	for n > 0 {
		k := min(n, l.writes[0])
		l.writes[0] -= k
		n -= k
		if l.writes[0] == 0 {
			l.writes = l.writes[1:]
		}
	}
	l.checkBounds()
	return true
}

// consume has the reader consume the oldest block.
func (l *link) consume() bool {
	if len(l.channel) == 0 {
		return false
	}
	blk := l.channel[0]
	l.channel = l.channel[1:]
	l.delivered = append(l.delivered, blk...)
	if !bytes.Equal(l.delivered, l.written[:len(l.delivered)]) {
		l.tb.Fatalf("%s: delivered bytes differ from written ones at %d", l.name, len(l.delivered)-len(blk))
	}
	l.consumed += uint64(len(blk))
	if rec, ok := l.rcv.Consumed(len(blk)); ok {
		if rec.Kind == wire.ControlWindow {
			l.windowPosted += uint64(rec.Value)
		}
		l.records = append(l.records, rec)
	}
	l.checkBounds()
	return true
}

// deliver hands the oldest control record to the sender's controller.
func (l *link) deliver() bool {
	if len(l.records) == 0 {
		return false
	}
	rec := l.records[0]
	l.records = l.records[1:]
	if err := l.snd.OnControl(rec); err != nil {
		l.tb.Fatalf("%s: OnControl(%+v) of the peer's own record: %v", l.name, rec, err)
	}
	switch rec.Kind {
	case wire.ControlCredit:
		l.credited += uint64(rec.Value)
	case wire.ControlWindow:
		l.windowGot += uint64(rec.Value)
	}
	l.checkBounds()
	return true
}

// valid says whether the model accepts rec at the sender now.
func (l *link) valid(rec wire.ControlRecord) bool {
	switch l.name {
	case flowcontrol.NameCredit:
		return rec.Kind == wire.ControlCredit && rec.Value > 0 && uint64(rec.Value) <= l.blocksSent-l.credited
	case flowcontrol.NameNICAssist:
		w := uint64(l.p.VirtualWindow)
		v := uint64(rec.Value)
		return rec.Kind == wire.ControlWindow && v > 0 && v%w == 0 &&
			l.windowGot-l.bytesSent+v <= uint64(l.p.ReceiveCapacity)
	}
	return false
}

// hostile injects rec when the model says it is invalid and checks that
// the sender rejects it with ErrProtocol and carries on as before.
func (l *link) hostile(rec wire.ControlRecord) bool {
	if l.valid(rec) {
		return false
	}
	before := l.snd.(flowcontrol.StatsSource).Stats()
	err := l.snd.OnControl(rec)
	if !errors.Is(err, wire.ErrProtocol) {
		l.tb.Fatalf("%s: OnControl(%+v) = %v, want ErrProtocol", l.name, rec, err)
	}
	if after := l.snd.(flowcontrol.StatsSource).Stats(); after != before {
		l.tb.Fatalf("%s: rejected record changed stats %+v -> %+v", l.name, before, after)
	}
	return true
}

// checkBounds checks the algorithm's limits and the shared accounting.
func (l *link) checkBounds() {
	l.tb.Helper()
	switch l.name {
	case flowcontrol.NameCredit:
		if out := l.blocksSent - l.credited; out > uint64(l.p.Credits) {
			l.tb.Fatalf("credit: %d blocks outstanding, %d credits", out, l.p.Credits)
		}
	case flowcontrol.NameNICAssist:
		if l.bytesSent > l.windowGot {
			l.tb.Fatalf("nicassist: %d bytes sent, %d window posted", l.bytesSent, l.windowGot)
		}
		if open := l.windowPosted - l.consumed; open > uint64(l.p.ReceiveCapacity) {
			l.tb.Fatalf("nicassist: %d window bytes open, capacity %d", open, l.p.ReceiveCapacity)
		}
	}
	s := l.snd.(flowcontrol.StatsSource).Stats()
	if s.BlocksSent != l.blocksSent || s.BytesSent != l.bytesSent || s.CoalescedBytes != l.coalesced {
		l.tb.Fatalf("%s: sender stats %+v, model blocks %d bytes %d coalesced %d",
			l.name, s, l.blocksSent, l.bytesSent, l.coalesced)
	}
	if r := l.rcv.(flowcontrol.StatsSource).Stats(); r.BytesConsumed != l.consumed {
		l.tb.Fatalf("%s: receiver stats %+v, model consumed %d", l.name, r, l.consumed)
	}
}

// drain runs the link until every written byte is delivered, failing on a
// round in which nothing can move (a deadlock).
func (l *link) drain() {
	l.tb.Helper()
	for len(l.delivered) < len(l.written) || len(l.records) > 0 {
		moved := false
		for l.send() {
			moved = true
		}
		for l.consume() {
			moved = true
		}
		for l.deliver() {
			moved = true
		}
		if !moved {
			l.tb.Fatalf("%s: deadlock: %d of %d bytes delivered, %d queued, %d blocks in channel",
				l.name, len(l.delivered), len(l.written), l.queued, len(l.channel))
		}
	}
	if l.queued != 0 || len(l.channel) != 0 {
		l.tb.Fatalf("%s: drained with %d queued, %d in channel", l.name, l.queued, len(l.channel))
	}
}
