package shim

import (
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/sdpshim/sdpshim/core/fdhook"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// Process is the shim's state in one shimmed process: the configuration
// (loaded once from the environment the interposer saw at load time), the
// logger, the fd table mirror, the rendezvous node (created on first
// use), and the channels to other processes, each on its own provider
// (domain.go). There is
// one per process; preload/entry holds it.
//
// Lock order: Socket.mu, then Process.mu, then channelTable.mu.
type Process struct {
	host   Host
	cfg    config.Config
	log    *logrus.Logger
	policy func() wait.WaitPolicy
	self   procID

	fds   fdTable
	words wordSlab
	reap  *reaper  // frees what closed connections leave, after directGrace (reap.go)
	areas areaPool // direct areas of closed connections, for the next ones (areapool.go)
	// What the interposer counts as offers held (plainaccept.go): the
	// node's and the peers' slabs mapped.
	plainMu     sync.Mutex
	plainOffers int        // +checklocks:plainMu
	plainSlabs  int        // +checklocks:plainMu
	deadlines   *reaper    // ends deferrals nobody pulled, after deferDeadline (deferred.go)
	short       shortConns // destinations whose connections were short-lived (shortconn.go)

	bells  ownBells           // this process's bells (bells.go)
	bellMu sync.Mutex         // guards peers and their counts
	peers  map[int]*peerBells // by pid: the peer processes' bells this process holds
	// peerCheck looks again at the idle records of processes still
	// running, every peerCheckEvery (bells.go).
	peerCheck      *time.Timer   // +checklocks:bellMu
	peerCheckEvery time.Duration // +checklocks:bellMu
	peerCheckOff   bool          // +checklocks:bellMu; set by Exit
	peerCheckDue   int64         // +checklocks:bellMu; when the scheduled look runs (nowNS), 0: none
	chans          channelTable
	tids           pollAttendance

	pollWait *wait.Waiter // the spin of poll hooks; shared, safe for concurrent use

	mu        sync.Mutex
	node      *rendezvous.Node         // +checklocks:mu; nil until first needed
	nodeErr   error                    // +checklocks:mu; why there is none
	listeners map[*Socket]struct{}     // +checklocks:mu; registered listeners
	deferred  map[deferKey]*Socket     // +checklocks:mu; connecting, deferred (deferred.go)
	pulling   map[rendezvous.Tuple]int // +checklocks:mu; kernel fds of the deferred connections being pulled, by Tuple.Canon (deferred_accept.go)
	live      map[*Socket]struct{}     // +checklocks:mu; accelerated sockets
	ungrouped int                      // +checklocks:mu; registered listeners that are not group listeners (fork.go)
	draining  []dataStream             // +checklocks:mu; closed, maybe not all sent yet (Exit)
	epolls    map[*epollSet]struct{}   // +checklocks:mu
	kept      map[*keptFork]struct{}   // +checklocks:mu; forks whose child may hold kept connections (forkkeep.go)
	logFile   *os.File                 // +checklocks:mu

	stats     *stats.Registry // every counter of the process (observe.go)
	stopStats func()          // stops the stats socket; nil when none
	chanIDs   channelIDs
	swatch    switchWatch // peers' switch requests (switchwatch.go)
	tenants   tenantBoard // the user's tenant board (tenants.go)
	trim      trimmer     // gives back what bursts left in areas (trim.go)
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
	if rt.Config.Enabled {
		protectProviderFDs(host)
	}
	if !rt.Config.Enabled {
		if rt.Reason == "" {
			return nil, ReasonShimOff
		}
		return nil, coreReason(rendezvous.ReasonBadSetting)
	}
	p := &Process{
		host: host, cfg: rt.Config, log: rt.Log,
		listeners: map[*Socket]struct{}{}, live: map[*Socket]struct{}{}, deferred: map[deferKey]*Socket{}, pulling: map[rendezvous.Tuple]int{},
		epolls:    map[*epollSet]struct{}{},
		logFile:   rt.LogFile,
		deadlines: newReaper(deferDeadline, 0, nil),
	}
	p.reap = newReaper(directGrace, idleRelease, p.releaseIdle)
	p.policy = waitPolicyFactory(rt.Config, rt.Log)
	p.pollWait = wait.NewWaiter(p.policy())
	p.initStats()
	p.self = procID{pid: os.Getpid(), start: rendezvous.StartTime(os.Getpid())}
	p.chans.init()
	p.short.init(host)
	if rt.LogFile != nil {
		p.protect(int(rt.LogFile.Fd()))
	}
	p.mu.Lock()
	p.forkWorkLocked() // nothing yet: forks need no ForkPrepare
	p.mu.Unlock()
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
	cfg := rendezvous.Config{
		RunDir:       p.cfg.RunDir,
		AllowUIDs:    p.cfg.AllowUIDs,
		Handler:      p.handleOffer,
		OnDrop:       p.onDrop,
		OnPull:       p.handlePull,
		PullHere:     p.cfg.Channel == config.ChannelDirect, // handlePull: OfferHere
		OfferTimeout: offerTimeout,
	}
	if p.plainHost() != nil {
		cfg.OnPending = p.offersHeld // only an interposer reads the count
		p.areas.onPeers = p.peerSlabsMapped
	}
	p.node, p.nodeErr = rendezvous.New(cfg)
	if p.nodeErr != nil {
		p.log.WithError(p.nodeErr).Warn("rendezvous unavailable; connections stay on kernel TCP")
	} else {
		fdhook.OpenSpare() // the rendezvous and stats answer at the fd limit too
	}
	return p.node, p.nodeErr
}

// fallback records that the connection of socket fd stays on kernel TCP
// for reason r: counted by the interposer (host) and in the stats
// registry (which fires the probe), logged at debug level.
func (p *Process) fallback(r rendezvous.Reason, fd int, fields logrus.Fields, why error) {
	n := coreReason(r)
	p.host.CountFallback(n)
	p.noteFallback(n, fd, fields)
	if p.log.IsLevelEnabled(logrus.DebugLevel) {
		e := p.log.WithFields(fields).WithField("reason", r.String())
		if why != nil {
			e = e.WithError(why)
		}
		e.Debug("connection stays on kernel TCP")
	}
}

func (p *Process) pollWaiter() *wait.Waiter { return p.pollWait }

var zeroTime time.Time

// pollDeadline is when the budget poll of a wait with timeout left (the
// program's; < 0: none) must end, whatever the wait policy's budget
// (SDPSHIM_POLL=busy polls without one).
func pollDeadline(timeout time.Duration) time.Time {
	if timeout < 0 {
		return zeroTime
	}
	return time.Now().Add(timeout)
}
