package stats

import (
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/flowcontrol"
)

// Options configure a Registry. Every field may be left zero.
type Options struct {
	// Log receives the stats server's lines (refused clients, errors).
	// nil discards them.
	Log logrus.FieldLogger
	// OnFallback is called by Fallback after counting, outside the lock:
	// preload/entry points it at the C probe sdpshim_probe_fallback.
	OnFallback func(reason, fd int, cookie uint64)
	// OnAccelerated is called by Open for a connection on shm or rdma,
	// outside the lock: preload/entry points it at the C probe
	// sdpshim_probe_accelerated.
	OnAccelerated func(t Transport, fd int, cookie uint64)
	// InterposerFallbacks, when set, returns how many fallbacks with a
	// code the interposer decided alone: its own codes (64 and up,
	// host->fallback[code]) and the accepts it kept on kernel TCP
	// without the core (peer-not-shimmed, preload/c/plainaccept.c); a
	// snapshot adds those to what the registry counts itself.
	InterposerFallbacks func(code int) uint64
}

// RecentFallbacks is how many fallback events a snapshot lists.
const RecentFallbacks = 32

// Registry holds one process's counters. The zero value is not usable;
// call NewRegistry. All methods are safe for concurrent use.
type Registry struct {
	opts    Options
	log     logrus.FieldLogger
	process Process

	fallbacks [MaxReason]atomic.Uint64
	server    struct{ served, refused, overloaded atomic.Uint64 }
	refusals  refusalLog

	mu     sync.Mutex
	nextID uint64                         // +checklocks:mu
	conns  map[*Conn]struct{}             // +checklocks:mu
	past   pastTotals                     // +checklocks:mu
	chans  map[*channelSource]struct{}    // +checklocks:mu
	waits  map[*waiterSource]struct{}     // +checklocks:mu
	events map[string]uint64              // +checklocks:mu; named setup events (Count)
	recent [RecentFallbacks]FallbackEvent // +checklocks:mu; a ring
	nrec   uint64                         // +checklocks:mu; events ever put in recent
}

// pastTotals count every connection opened (opened, accelerated) and
// the counters of those already closed (the rest).
type pastTotals struct {
	opened, accelerated                            uint64
	bytesTx, bytesRx, msgsTx, msgsRx, pree, pauses uint64
	moves                                          uint64
	flow                                           flowcontrol.Stats
}

// NewRegistry returns an empty registry for the calling process.
func NewRegistry(o Options) *Registry {
	log := o.Log
	if log == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		l.SetLevel(logrus.PanicLevel)
		log = l
	}
	return &Registry{
		opts: o,
		log:  log,
		process: Process{
			PID: os.Getpid(), UID: uint32(os.Geteuid()), Comm: comm(), Started: time.Now(),
		},
		conns:  map[*Conn]struct{}{},
		chans:  map[*channelSource]struct{}{},
		waits:  map[*waiterSource]struct{}{},
		events: map[string]uint64{},
	}
}

// Count bumps the named event counter (setup-path events that are not a
// connection or a fallback: "connect.failed", "offer.dropped.expired",
// ...). It takes the registry's lock; never call it per byte or message.
func (r *Registry) Count(name string) {
	r.mu.Lock()
	r.events[name]++
	r.mu.Unlock()
}

// Events returns the named event counters (Count), a copy.
func (r *Registry) Events() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.events)
}

// comm returns the process's command name, as ps shows it.
func comm() string {
	// Raw calls: an os.File would also try the runtime's poller and fstat
	// the file, a third of this call's cost in a fork child's core start.
	fd, err := unix.Open("/proc/self/comm", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	var b [64]byte // the kernel's comm is at most 16 bytes
	n, err := unix.Read(fd, b[:])
	if err != nil || n <= 0 {
		return ""
	}
	return strings.TrimSpace(string(b[:n]))
}

// Open registers a connection and returns its counters. A connection on
// shm or rdma fires OnAccelerated. A TransportTCPFallback connection is
// listed with its reason but not counted as a fallback: call Fallback
// for that (once per connection).
func (r *Registry) Open(info ConnInfo) *Conn {
	c := &Conn{reg: r, info: info, opened: time.Now()}
	c.route.Store(uint32(info.Transport)<<8 | uint32(info.Reason&0xff))
	if info.Flow != "" {
		c.flow.Store(&flowSource{name: info.Flow})
	}
	r.mu.Lock()
	r.nextID++
	c.id = r.nextID
	r.conns[c] = struct{}{}
	r.past.opened++ // counts opened connections, open or not
	if info.Transport.Accelerated() {
		r.past.accelerated++
	}
	r.mu.Unlock()
	if info.Transport.Accelerated() && r.opts.OnAccelerated != nil {
		r.opts.OnAccelerated(info.Transport, info.FD, info.Cookie)
	}
	return c
}

func (r *Registry) close(c *Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	delete(r.conns, c)
	s, flow := c.stats()
	t := &r.past
	t.bytesTx += s.BytesSent
	t.bytesRx += s.BytesReceived
	t.msgsTx += s.MessagesSent
	t.msgsRx += s.MessagesReceived
	t.pree += s.Preemptions
	t.pauses += s.Pauses
	t.moves += s.Moves
	t.flow.Add(flow)
}

// FallbackInfo describes one connection that stays on kernel TCP.
type FallbackInfo struct {
	Reason int // code, 1..MaxReason-1
	FD     int
	Cookie uint64 // SO_COOKIE of the socket, 0 when unknown
	Local  netip.AddrPort
	Peer   netip.AddrPort
}

// Fallback counts one connection that stays on kernel TCP, keeps it in
// the recent list and fires OnFallback (the probe). It is a setup-path
// call: it takes the registry's lock briefly.
func (r *Registry) Fallback(f FallbackInfo) {
	if f.Reason > 0 && f.Reason < MaxReason {
		r.fallbacks[f.Reason].Add(1)
	}
	ev := FallbackEvent{Time: time.Now(), Code: f.Reason, Name: ReasonName(f.Reason), FD: f.FD, Cookie: f.Cookie}
	if f.Local.IsValid() {
		ev.Local = f.Local.String()
	}
	if f.Peer.IsValid() {
		ev.Peer = f.Peer.String()
	}
	r.mu.Lock()
	r.recent[r.nrec%RecentFallbacks] = ev
	r.nrec++
	r.mu.Unlock()
	if r.opts.OnFallback != nil {
		r.opts.OnFallback(f.Reason, f.FD, f.Cookie)
	}
}

// FallbackCount returns how many fallbacks with code were counted, those
// the interposer decided alone included.
func (r *Registry) FallbackCount(code int) uint64 {
	if code <= 0 || code >= MaxReason {
		return 0
	}
	n := r.fallbacks[code].Load()
	if r.opts.InterposerFallbacks != nil {
		n += r.opts.InterposerFallbacks(code)
	}
	return n
}

// Snapshot returns the process's counters now.
func (r *Registry) Snapshot() *Snapshot {
	s := &Snapshot{Version: Version, Process: r.process, Time: time.Now(),
		// Empty lists, not null, in JSON.
		Channels: []ChannelSnapshot{}, Waiters: []WaiterSnapshot{}, Fallbacks: []ReasonCount{}, RecentFallbacks: []FallbackEvent{}}
	for code := 1; code < MaxReason; code++ {
		if n := r.FallbackCount(code); n > 0 {
			s.Fallbacks = append(s.Fallbacks, ReasonCount{Code: code, Name: ReasonName(code), Count: n})
			s.Totals.Fallbacks += n
		}
	}
	s.Server = ServerStats{
		Served: r.server.served.Load(), Refused: r.server.refused.Load(), Overloaded: r.server.overloaded.Load(),
	}

	r.mu.Lock()
	t := r.past
	flow := t.flow
	s.Totals.ConnsOpened, s.Totals.Accelerated = t.opened, t.accelerated
	s.Totals.ConnsOpen = uint64(len(r.conns))
	s.Totals.BytesSent, s.Totals.BytesReceived = t.bytesTx, t.bytesRx
	s.Totals.MessagesSent, s.Totals.MessagesReceived = t.msgsTx, t.msgsRx
	s.Scheduler.Preemptions, s.Scheduler.Pauses, s.Scheduler.Moves = t.pree, t.pauses, t.moves
	s.Connections = make([]ConnStats, 0, len(r.conns))
	for c := range r.conns {
		cs, cf := c.stats()
		flow.Add(cf)
		s.Connections = append(s.Connections, cs)
		s.Totals.BytesSent += cs.BytesSent
		s.Totals.BytesReceived += cs.BytesReceived
		s.Totals.MessagesSent += cs.MessagesSent
		s.Totals.MessagesReceived += cs.MessagesReceived
		s.Scheduler.Preemptions += cs.Preemptions
		s.Scheduler.Pauses += cs.Pauses
		s.Scheduler.Moves += cs.Moves
	}
	s.Events = maps.Clone(r.events)
	for ch := range r.chans {
		s.Channels = append(s.Channels, ChannelSnapshot{ch.info, ch.read()})
	}
	for w := range r.waits {
		s.Waiters = append(s.Waiters, waiterSnapshot(w.name, w.read()))
	}
	n := min(r.nrec, RecentFallbacks)
	for i := r.nrec - n; i < r.nrec; i++ {
		s.RecentFallbacks = append(s.RecentFallbacks, r.recent[i%RecentFallbacks])
	}
	r.mu.Unlock()

	s.Flow = flowStats(flow)
	slices.SortFunc(s.Connections, func(a, b ConnStats) int { return cmpUint(a.ID, b.ID) })
	slices.SortFunc(s.Channels, func(a, b ChannelSnapshot) int { return cmpUint(a.ID, b.ID) })
	slices.SortFunc(s.Waiters, func(a, b WaiterSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return s
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
