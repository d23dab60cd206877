package stats

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

// Transport is what carries a connection's bytes.
type Transport uint8

// Transports.
const (
	TransportSHM         Transport = 1 // shared memory, same host
	TransportRDMA        Transport = 2 // RDMA
	TransportTCPFallback Transport = 3 // kernel TCP: a fallback, with a reason
)

// String returns "shm", "rdma" or "tcp-fallback".
func (t Transport) String() string {
	switch t {
	case TransportSHM:
		return "shm"
	case TransportRDMA:
		return "rdma"
	case TransportTCPFallback:
		return "tcp-fallback"
	}
	return "unknown"
}

// Accelerated reports whether t moves bytes outside kernel TCP.
func (t Transport) Accelerated() bool { return t == TransportSHM || t == TransportRDMA }

// ConnInfo describes a connection when it is registered. It does not
// change afterwards, except the transport and reason (Conn.FellBack).
type ConnInfo struct {
	FD        int            // the program's fd
	Local     netip.AddrPort // local TCP address
	Peer      netip.AddrPort // remote TCP address
	PeerPID   int            // peer process, 0 when unknown (another host)
	Cookie    uint64         // SO_COOKIE of the TCP socket, 0 when unknown
	Channel   uint64         // channel the streams ride on (AddChannel's ID), 0 for none
	Transport Transport
	Reason    int    // fallback code for TransportTCPFallback, else 0
	Flow      string // flow controller name (SDPSHIM_FLOW), "" for none
}

// cacheLine is the pad that keeps a side's counters off its neighbours'
// lines (x86's 64 bytes; twice that would cover the adjacent-line
// prefetcher, at twice the padding).
const cacheLine = 64

// side is one direction's counters, alone on its cache lines so that a
// sending thread and a receiving thread never share a line.
type side struct {
	_           [cacheLine]byte
	bytes, msgs atomic.Uint64
	preemptions atomic.Uint64 // sending side only
	pauses      atomic.Uint64 // sending side only
	moves       atomic.Uint64 // sending side only (the connection's, not a direction's)
	socketRings atomic.Uint64 // sending side only
	_           [cacheLine]byte
}

// Conn is one registered connection. Its update methods (Sent, Received,
// Preempted) are lock-free atomic adds, safe from any goroutine; they are
// still valid after Close, but no longer counted anywhere.
type Conn struct {
	reg    *Registry
	id     uint64
	info   ConnInfo
	opened time.Time
	// route is transport<<8 | reason, changed by FellBack.
	route  atomic.Uint32
	flow   atomic.Pointer[flowSource]
	tx, rx side
	extra  atomic.Pointer[func() Extra]
	closed bool // +checklocks:reg.mu
}

// Extra are counts kept outside the connection's own counters: those of
// the calls the interposer makes itself on the direct path, or the
// scheduler's counts of a stream of a channel.
type Extra struct {
	BytesSent, MessagesSent, BytesReceived, MessagesReceived uint64
	Preemptions, Pauses                                      uint64
	Moves                                                    uint64 // waits that moved their thread off the peer's CPU
	SocketRings                                              uint64 // wakes of the peer's sleepers sent over the socket (no bell)
}

// SetExtra adds the counts f returns to every snapshot, until FoldExtra.
func (c *Conn) SetExtra(f func() Extra) { c.extra.Store(&f) }

// FoldExtra adds the extra source's counts to the connection's own and
// forgets the source (before what it reads goes away).
func (c *Conn) FoldExtra() {
	f := c.extra.Swap(nil)
	if f == nil {
		return
	}
	x := (*f)()
	c.tx.bytes.Add(x.BytesSent)
	c.tx.msgs.Add(x.MessagesSent)
	c.rx.bytes.Add(x.BytesReceived)
	c.rx.msgs.Add(x.MessagesReceived)
	c.tx.preemptions.Add(x.Preemptions)
	c.tx.pauses.Add(x.Pauses)
	c.tx.moves.Add(x.Moves)
	c.tx.socketRings.Add(x.SocketRings)
}

type flowSource struct {
	name string
	src  flowcontrol.StatsSource
}

// Sent counts one message (one send call, or one block) of n bytes sent.
func (c *Conn) Sent(n int) {
	c.tx.bytes.Add(uint64(n))
	c.tx.msgs.Add(1) // after the bytes: a snapshot never sees a message without them
}

// AddSent counts bytes and messages sent before the connection was
// registered (written while its acceptor had not accepted yet).
func (c *Conn) AddSent(bytes, msgs uint64) {
	c.tx.bytes.Add(bytes)
	c.tx.msgs.Add(msgs)
}

// SentBytes counts n bytes sent by a call that is not over yet (a
// blocking send that moved part of its bytes before it had to sleep):
// bytes without a message; the call's end counts its rest with Sent.
func (c *Conn) SentBytes(n int) { c.tx.bytes.Add(uint64(n)) }

// ReceivedBytes is SentBytes for the receiving side (MSG_WAITALL).
func (c *Conn) ReceivedBytes(n int) { c.rx.bytes.Add(uint64(n)) }

// ID returns the connection's id in its registry (ConnStats.ID), unique
// in the process.
func (c *Conn) ID() uint64 { return c.id }

// Received counts one message of n bytes received by the program.
func (c *Conn) Received(n int) {
	c.rx.bytes.Add(uint64(n))
	c.rx.msgs.Add(1)
}

// Preempted counts one scheduling point taken inside a large write.
func (c *Conn) Preempted() { c.tx.preemptions.Add(1) }

// SetFlow names the connection's flow controller and the source of its
// counters; src may be nil. Set it once the controller exists.
func (c *Conn) SetFlow(name string, src flowcontrol.StatsSource) {
	c.flow.Store(&flowSource{name: name, src: src})
}

// Transport returns the connection's current transport and fallback code.
func (c *Conn) Transport() (Transport, int) {
	r := c.route.Load()
	return Transport(r >> 8), int(r & 0xff)
}

// FellBack records that an accelerated connection moved to kernel TCP
// for reason (e.g. a fork child declined its stream): the connection now
// shows tcp-fallback, and the fallback is counted and probed like one at
// setup (Registry.Fallback).
func (c *Conn) FellBack(reason int) {
	c.route.Store(uint32(TransportTCPFallback)<<8 | uint32(reason&0xff))
	c.reg.Fallback(FallbackInfo{Reason: reason, FD: c.info.FD, Cookie: c.info.Cookie, Local: c.info.Local, Peer: c.info.Peer})
}

// Close unregisters the connection; its counts stay in the process
// totals. Closing twice is harmless.
func (c *Conn) Close() { c.reg.close(c) }

// stats reads the connection's counters (messages before bytes, so that
// bytes always include the messages counted) and its controller's.
func (c *Conn) stats() (ConnStats, flowcontrol.Stats) {
	t, reason := c.Transport()
	s := ConnStats{
		ID: c.id, FD: c.info.FD, PeerPID: c.info.PeerPID, Cookie: c.info.Cookie, Channel: c.info.Channel,
		Transport: t.String(), Reason: reason, Opened: c.opened,
	}
	if c.info.Local.IsValid() {
		s.Local = c.info.Local.String()
	}
	if c.info.Peer.IsValid() {
		s.Peer = c.info.Peer.String()
	}
	if reason != 0 {
		s.ReasonName = ReasonName(reason)
	}
	s.MessagesSent = c.tx.msgs.Load()
	s.MessagesReceived = c.rx.msgs.Load()
	s.BytesSent = c.tx.bytes.Load()
	s.BytesReceived = c.rx.bytes.Load()
	if f := c.extra.Load(); f != nil {
		x := (*f)()
		s.MessagesSent += x.MessagesSent
		s.MessagesReceived += x.MessagesReceived
		s.BytesSent += x.BytesSent
		s.BytesReceived += x.BytesReceived
		s.Preemptions += x.Preemptions
		s.Pauses += x.Pauses
		s.Moves += x.Moves
		s.SocketRings += x.SocketRings
	}
	s.Preemptions += c.tx.preemptions.Load()
	s.Pauses += c.tx.pauses.Load()
	s.Moves += c.tx.moves.Load()
	s.SocketRings += c.tx.socketRings.Load()
	s.Flow = c.info.Flow
	var raw flowcontrol.Stats
	if f := c.flow.Load(); f != nil {
		s.Flow = f.name
		if f.src != nil {
			raw = f.src.Stats()
			fs := flowStats(raw)
			s.FlowStats = &fs
		}
	}
	return s, raw
}
