package probes

import (
	"net/netip"
	"time"
)

// Tuple is a TCP socket's addresses, from the socket's point of view.
type Tuple struct {
	Local, Remote netip.AddrPort
}

func tupleOf(saddr, daddr [16]uint8, sport, dport, family uint16) Tuple {
	var l, r netip.Addr
	if family == 2 { // AF_INET
		l = netip.AddrFrom4([4]byte(saddr[:4]))
		r = netip.AddrFrom4([4]byte(daddr[:4]))
	} else {
		l = netip.AddrFrom16(saddr).Unmap()
		r = netip.AddrFrom16(daddr).Unmap()
	}
	return Tuple{netip.AddrPortFrom(l, sport), netip.AddrPortFrom(r, dport)}
}

// ConnBytes is the kernel-TCP payload one process moved on one socket.
type ConnBytes struct {
	PID    uint32
	Cookie uint64
	Tuple
	Comm           string
	Sent, Received uint64
	// SentAccel and ReceivedAccel count the bytes moved after the socket
	// was reported accelerated: more than 0 is a silent fallback.
	SentAccel, ReceivedAccel uint64
	First, Last              time.Duration // CLOCK_MONOTONIC
}

// Conns returns every (pid, socket) that moved bytes through kernel TCP
// since Load, up to the map's size (least recently used forgotten first).
func (t *Tracer) Conns() ([]ConnBytes, error) {
	var out []ConnBytes
	var k traceConnKey
	var v traceConnVal
	it := t.objs.Conns.Iterate()
	for it.Next(&k, &v) {
		out = append(out, ConnBytes{
			PID: k.Pid, Cookie: k.Cookie,
			Tuple: tupleOf(v.Tuple.Saddr, v.Tuple.Daddr, v.Tuple.Sport, v.Tuple.Dport, v.Tuple.Family),
			Comm:  cString(v.Comm[:]), Sent: v.Sent, Received: v.Received,
			SentAccel: v.SentAccel, ReceivedAccel: v.ReceivedAccel,
			First: time.Duration(v.FirstNs), Last: time.Duration(v.LastNs),
		})
	}
	return out, it.Err()
}

// TCP states (include/net/tcp_states.h) that SockState reports.
const (
	TCPEstablished = 1
	TCPSynSent     = 2
	TCPClose       = 7
)

// SockState is the last TCP state change of a socket.
type SockState struct {
	Cookie uint64
	Tuple
	State int
	PID   uint32 // the connecting process (active open), 0 when unknown
	Time  time.Duration
}

// States returns the sockets whose TCP state changed since Load.
func (t *Tracer) States() ([]SockState, error) {
	var out []SockState
	var k uint64
	var v traceStateVal
	it := t.objs.States.Iterate()
	for it.Next(&k, &v) {
		out = append(out, SockState{
			Cookie: k, Tuple: tupleOf(v.Tuple.Saddr, v.Tuple.Daddr, v.Tuple.Sport, v.Tuple.Dport, v.Tuple.Family),
			State: int(v.State), PID: v.Pid, Time: time.Duration(v.TimeNs),
		})
	}
	return out, it.Err()
}

// MarkAccelerated records that the socket with cookie is accelerated,
// for connections made before the tracer ran (read from stats sockets):
// its later kernel bytes count as SentAccel/ReceivedAccel.
func (t *Tracer) MarkAccelerated(cookie uint64, at time.Duration) error {
	return t.objs.Accelerated.Put(cookie, uint64(at))
}

// Forget drops a socket from the maps (after reporting its close).
func (t *Tracer) Forget(pid uint32, cookie uint64) {
	k := traceConnKey{Pid: pid, Cookie: cookie}
	// ebpf.ErrKeyNotExist means gone already: fine.
	t.objs.Conns.Delete(&k)
	t.objs.States.Delete(cookie)
	t.objs.Accelerated.Delete(cookie)
}
