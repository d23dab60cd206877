package shim

import (
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
	"github.com/sdpshim/sdpshim/core/slidingwindow"
	"github.com/sdpshim/sdpshim/core/statusbyte"
	"github.com/sdpshim/sdpshim/core/wire"
	"github.com/sdpshim/sdpshim/flowcontrol"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// Observability: the process's stats registry (shim/stats) and the probe
// functions. The registry is the one place the shim counts anything:
// connections (opened on the accelerated path, closed with their last
// fd), bytes and messages per call, fallbacks by reason, and named setup
// events; channels and waiters are read from their own atomic counters
// when a snapshot is taken. See docs/observability.md.

// Observer is implemented by a Host that can fire the exported probe
// functions and read the interposer's own fallback counts (preload/entry's
// host does). A Host without it gets a registry that fires nothing and
// counts only the core's codes.
type Observer interface {
	// ProbeFallback calls sdpshim_probe_fallback(reason, fd, cookie).
	// It must not block; it is a call and a return when nobody traces.
	ProbeFallback(reason, fd int, cookie uint64)
	// ProbeAccelerated calls sdpshim_probe_accelerated(transport, fd,
	// cookie); transport is stats.Transport's value (1 shm, 2 rdma).
	ProbeAccelerated(transport, fd int, cookie uint64)
	// InterposerFallbacks returns the interposer's count of fallbacks
	// with code that it decided alone (its own codes, 64 and up, and the
	// accepts it kept on kernel TCP without the core), read atomically.
	InterposerFallbacks(code int) uint64
}

// initStats makes the registry and, with SDPSHIM_STATS=1, serves it on
// the stats socket. A server that cannot start is logged; the shim runs
// on without it.
func (p *Process) initStats() {
	o := stats.Options{Log: p.log}
	if ob, ok := p.host.(Observer); ok {
		o.OnFallback = ob.ProbeFallback
		o.OnAccelerated = func(t stats.Transport, fd int, cookie uint64) { ob.ProbeAccelerated(int(t), fd, cookie) }
		o.InterposerFallbacks = ob.InterposerFallbacks
	}
	p.stats = stats.NewRegistry(o)
	p.stats.AddWaiter("poll", p.pollWait.Stats)
	if !p.cfg.Stats {
		return
	}
	srv := &stats.Server{RunDir: p.cfg.RunDir, Allow: p.cfg.AllowUIDs, Registry: p.stats, Protect: p.protect, Unprotect: p.unprotect}
	stop, err := srv.Start()
	if err != nil {
		p.log.WithError(err).Warn("stats socket unavailable; the shim runs on without it")
		return
	}
	p.stopStats = stop
}

// Stats returns the process's registry (for tests and embedders).
func (p *Process) Stats() *stats.Registry { return p.stats }

// Counters returns the shim's named setup events and fallback counts (by
// reason name, "fallback.<name>"), read from the registry.
func (p *Process) Counters() map[string]uint64 {
	out := p.stats.Events()
	for code := 1; code < stats.MaxReason; code++ {
		if n := p.stats.FallbackCount(code); n > 0 {
			out["fallback."+stats.ReasonName(code)] = n
		}
	}
	return out
}

// count bumps one of the shim's named setup events.
func (p *Process) count(name string) { p.stats.Count(name) }

// noteFallback counts a fallback in the registry, which keeps it in the
// recent list and fires the probe. fields may carry "local" and "remote"
// (netip.AddrPort).
func (p *Process) noteFallback(code, fd int, fields logrus.Fields) {
	f := stats.FallbackInfo{Reason: code, FD: fd, Cookie: socketCookie(fd)}
	f.Local, _ = fields["local"].(netip.AddrPort)
	f.Peer, _ = fields["remote"].(netip.AddrPort)
	if !f.Local.IsValid() && fd >= 0 {
		if l, err := sockName(fd); err == nil && l.Port() != 0 {
			f.Local = l
		}
	}
	p.stats.Fallback(f)
}

// socketCookie returns fd's SO_COOKIE, the key of `sdpshim trace`; 0
// when unknown.
func socketCookie(fd int) uint64 {
	if fd < 0 {
		return 0
	}
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return 0
	}
	return c
}

// connObs is an accelerated socket's registration: its counters and the
// removers of its waiters.
type connObs struct {
	*stats.Conn
	removes []func() // the connection's waiters
}

// openStatsLocked registers s, just accelerated on e with st, as an open
// connection (which fires the accelerated probe).
//
// +checklocks:s.mu
func (s *Socket) openStatsLocked(e *channelEnd, st dataStream) {
	p := s.p
	fd := -1
	if len(s.fds) > 0 {
		fd = s.fds[0]
	}
	info := stats.ConnInfo{FD: fd, Cookie: socketCookie(fd), Transport: stats.TransportSHM, Flow: string(p.cfg.Flow)}
	ds, _ := st.(*directStream)
	if ds != nil {
		info.PeerPID, info.Flow = ds.peerPID, "direct"
	} else {
		info.PeerPID, info.Channel = e.peer.pid, p.chanIDs.of(e.ch)
	}
	info.Local, info.Peer = s.names.local, s.names.peer
	if fd >= 0 && (!info.Local.IsValid() || info.Local.Port() == 0) {
		info.Local, _ = sockName(fd)
	}
	if fd >= 0 && !info.Peer.IsValid() {
		info.Peer = peerName(fd)
	}
	c := p.stats.Open(info)
	if src := flowStatsOf(st.Flow()); src != nil {
		c.SetFlow(string(p.cfg.Flow), src)
	}
	if ds != nil {
		c.SetExtra(ds.counts)
	} else if ss, ok := st.(interface{ SchedStats() mux.SchedStats }); ok {
		c.SetExtra(func() stats.Extra {
			x := ss.SchedStats()
			return stats.Extra{Preemptions: x.Preemptions, Pauses: x.Pauses + s.spre.pre.Pauses()}
		})
	}
	c.AddSent(s.earlySent.bytes, s.earlySent.msgs) // written before the verdict
	s.earlySent.bytes, s.earlySent.msgs = 0, 0
	o := &connObs{Conn: c}
	name := "conn" + strconv.FormatUint(c.ID(), 10)
	o.removes = append(o.removes, p.stats.AddWaiter(name+".read", s.rdWait.Stats), p.stats.AddWaiter(name+".write", s.wrWait.Stats))
	if ds != nil {
		o.removes = append(o.removes, p.stats.AddWaiter(name+".direct", ds.waitStats))
	}
	s.obs.Store(o)
}

// closeStats unregisters s's connection; its counts stay in the totals.
func (s *Socket) closeStats() {
	o := s.obs.Swap(nil)
	if o == nil {
		return
	}
	for _, remove := range o.removes {
		remove()
	}
	o.FoldExtra()
	o.Close()
}

// flowStatsOf returns the counters of a stream's flow controller, looking
// through the shim's wrapper (progressFlow); nil when it keeps none.
func flowStatsOf(fc wire.FlowController) flowcontrol.StatsSource {
	for fc != nil {
		if src, ok := fc.(flowcontrol.StatsSource); ok {
			return src
		}
		u, ok := fc.(interface{ Unwrap() wire.FlowController })
		if !ok {
			return nil
		}
		fc = u.Unwrap()
	}
	return nil
}

// countSent counts a send call's result on s: r > 0 bytes in one
// message; a call that must sleep (WaitResult) the bytes it moved so far.
// It returns r.
func (s *Socket) countSent(r int64, w *Wait) int64 {
	if o := s.obs.Load(); o != nil {
		switch {
		case r > 0:
			o.Sent(int(r))
		case r == WaitResult && w.Done > 0:
			o.SentBytes(int(w.Done))
		}
	}
	return r
}

// countReceived is countSent for receive calls; peeks are not counted.
func (s *Socket) countReceived(r int64, flags int, w *Wait) int64 {
	if flags&unix.MSG_PEEK != 0 {
		return r
	}
	if o := s.obs.Load(); o != nil {
		switch {
		case r > 0:
			o.Received(int(r))
		case r == WaitResult && w.Done > 0:
			o.ReceivedBytes(int(w.Done))
		}
	}
	return r
}

// channelIDs numbers the process's channels for the registry
// (stats.ChannelInfo.ID, stats.ConnInfo.Channel).
type channelIDs struct {
	next atomic.Uint64
	ids  sync.Map // *mux.Channel -> uint64
}

func (c *channelIDs) of(ch *mux.Channel) uint64 {
	if v, ok := c.ids.Load(ch); ok {
		return v.(uint64)
	}
	return 0
}

// addChannelStats registers channel ch over transport t with the
// registry until the channel ends.
func (p *Process) addChannelStats(ch *mux.Channel, t channelTransport, peerPID int) {
	id := p.chanIDs.next.Add(1)
	info := stats.ChannelInfo{ID: id, PeerPID: peerPID, Transport: string(p.cfg.Transport), Blocks: p.cfg.Blocks, BlockSize: p.cfg.BlockSize}
	read := transportStats(t)
	if read == nil {
		return
	}
	p.chanIDs.ids.Store(ch, id)
	remove := p.stats.AddChannel(info, read)
	go func() {
		<-ch.Done()
		remove()
		p.chanIDs.ids.Delete(ch)
	}()
}

// transportStats returns the reader of a block transport's counters.
func transportStats(t channelTransport) func() stats.ChannelStats {
	switch t := t.(type) {
	case *statusbyte.Transport:
		return func() stats.ChannelStats {
			s := t.Stats()
			return stats.ChannelStats{
				BlocksInUse: sub(s.BlocksReceived, s.BlocksReleased), ReadSyncs: s.StatusReads, RetainedSkips: s.SkippedRetained,
				BlocksSent: s.BlocksSent, BlocksReceived: s.BlocksReceived, SendFull: s.SendFull,
			}
		}
	case *slidingwindow.Transport:
		return func() stats.ChannelStats {
			s := t.Stats()
			return stats.ChannelStats{
				BlocksInUse: sub(s.BlocksReceived, s.BlocksReleased),
				BlocksSent:  s.BlocksSent, BlocksReceived: s.BlocksReceived, SendFull: s.SendFull,
			}
		}
	}
	return nil
}

// sub is a - b, 0 when the two counters were read across an update.
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
