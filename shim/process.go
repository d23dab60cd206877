package shim

import (
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/core"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/shm"
	"github.com/sdpshim/sdpshim/shim/config"
)

// Process is the shim's state in one shimmed process: the configuration
// (loaded once from the environment the interposer saw at load time), the
// logger, the fd table mirror, the rendezvous node and the provider
// (created on first use), and the channels to other processes. There is
// one per process; preload/entry holds it.
//
// Lock order: Socket.mu, then Process.mu, then channelTable.mu.
type Process struct {
	host   Host
	cfg    config.Config
	log    *logrus.Logger
	policy func() core.WaitPolicy
	self   procID

	fds   fdTable
	words wordSlab
	chans channelTable
	tids  pollAttendance

	pollWait *core.Waiter // the spin of poll hooks; shared, safe for concurrent use

	mu        sync.Mutex
	node      *rendezvous.Node       // +checklocks:mu; nil until first needed
	nodeErr   error                  // +checklocks:mu; why there is none
	provider  *shm.Provider          // +checklocks:mu
	listeners map[*Socket]struct{}   // +checklocks:mu; registered listeners
	live      map[*Socket]struct{}   // +checklocks:mu; accelerated sockets
	draining  []*core.Stream         // +checklocks:mu; closed, maybe not all sent yet (Exit)
	epolls    map[*epollSet]struct{} // +checklocks:mu
	logFile   *os.File               // +checklocks:mu
	fallbacks [ReasonMax]uint64      // +checklocks:mu; the shim's own counts, for tests and stats
	counters  map[string]uint64      // +checklocks:mu
}

// procID names a process across pid reuse: its pid and start time.
type procID struct {
	pid   int
	start uint64
}

// Init loads the configuration from environ and returns the process
// state, or a positive reason (and nil) when the shim must stay off: the
// configuration disabled it or is invalid. Problems with the configuration
// are reported by config.Open, one line each.
func Init(host Host, environ []string) (*Process, int) {
	protectRuntime(host)
	rt := config.Open(environ)
	if !rt.Config.Enabled {
		if rt.Reason == "" {
			return nil, ReasonShimOff
		}
		return nil, coreReason(rendezvous.ReasonBadSetting)
	}
	p := &Process{
		host: host, cfg: rt.Config, log: rt.Log,
		listeners: map[*Socket]struct{}{}, live: map[*Socket]struct{}{},
		epolls: map[*epollSet]struct{}{}, counters: map[string]uint64{},
		logFile: rt.LogFile,
	}
	p.policy = waitPolicyFactory(rt.Config, rt.Log)
	p.pollWait = core.NewWaiter(p.policy())
	p.self = procID{pid: os.Getpid(), start: processStart(os.Getpid())}
	p.chans.init()
	if rt.LogFile != nil {
		p.protect(int(rt.LogFile.Fd()))
	}
	p.log.WithFields(logrus.Fields{
		"provider": p.cfg.Provider, "transport": p.cfg.Transport, "flow": p.cfg.Flow,
		"blocks": p.cfg.Blocks, "block_size": p.cfg.BlockSize, "channel": p.cfg.Channel,
	}).Debug("sdpshim core running")
	return p, 0
}

// rendezvousNode returns the process's node, creating it on first use.
func (p *Process) rendezvousNode() (*rendezvous.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node != nil || p.nodeErr != nil {
		return p.node, p.nodeErr
	}
	p.node, p.nodeErr = rendezvous.New(rendezvous.Config{
		RunDir:       p.cfg.RunDir,
		AllowUIDs:    p.cfg.AllowUIDs,
		Handler:      p.handleOffer,
		OnDrop:       p.onDrop,
		OfferTimeout: offerTimeout,
	})
	if p.nodeErr != nil {
		p.log.WithError(p.nodeErr).Warn("rendezvous unavailable; connections stay on kernel TCP")
	}
	return p.node, p.nodeErr
}

// shmProvider returns the process's shm provider, opening it on first use.
func (p *Process) shmProvider() (*shm.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return p.provider, nil
	}
	pr, err := shm.Open()
	if err != nil {
		return nil, err
	}
	p.provider = pr
	return pr, nil
}

// fallback records that a connection stays on kernel TCP for reason r:
// counted by the interposer (host) and here, logged at debug level.
func (p *Process) fallback(r rendezvous.Reason, fields logrus.Fields, why error) {
	n := coreReason(r)
	p.host.CountFallback(n)
	p.mu.Lock()
	p.fallbacks[n]++
	p.mu.Unlock()
	if p.log.IsLevelEnabled(logrus.DebugLevel) {
		e := p.log.WithFields(fields).WithField("reason", r.String())
		if why != nil {
			e = e.WithError(why)
		}
		e.Debug("connection stays on kernel TCP")
	}
}

// count bumps one of the shim's named counters.
func (p *Process) count(name string) {
	p.mu.Lock()
	p.counters[name]++
	p.mu.Unlock()
}

// Counters returns a snapshot of the shim's named counters and fallback
// counts (by reason name), for stats and tests.
func (p *Process) Counters() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.counters)+8)
	for k, v := range p.counters {
		out[k] = v
	}
	for _, r := range rendezvous.Reasons() {
		if v := p.fallbacks[coreReason(r)]; v > 0 {
			out["fallback."+r.String()] = v
		}
	}
	return out
}

func (p *Process) pollWaiter() *core.Waiter { return p.pollWait }

var zeroTime time.Time
