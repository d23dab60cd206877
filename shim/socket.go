package shim

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/core/rendezvous"
	"github.com/sdpshim/sdpshim/core/wait"
)

// Socket is one TCP socket the shim tracks, named by one or more fds (dup
// shares it). Its life is a small state machine:
//
//	created ──listen──▶ listening                       (CANDIDATE)
//	   │
//	   ├──connect, rendezvous answered──▶ connecting     (MANAGED: kernel
//	   │        connect and the acceptor's verdict pending)
//	   │                 ├──verdict accepted──▶ accelerated  (MANAGED)
//	   │                 └──declined, connect failed──▶ fallback
//	   ├──connect, no rendezvous (plain peer, rule, ...)──▶ fallback
//	   └──accept() matched a rendezvous──▶ accelerated    (a new Socket)
//
//	accept() on a group listener, or an unknown inherited connected fd
//	──▶ adopted (CANDIDATE: nothing decided; deferred_accept.go)
//	         ├──first use, pulled and claimed──▶ accelerated (MANAGED)
//	         └──no record, PULL refused, ...──▶ fallback
//	connect to a group listener ──▶ connecting, deferred (deferred.go)
//	         ├──PULL: offer committed──▶ connecting, verdict pending
//	         └──deadline, bytes on TCP, close──▶ fallback
//
//	accelerated ──shutdown──▶ half-closed (shutRD/shutWR, still accelerated)
//	any ──last fd closed──▶ closed
//
// A fallback socket is plain kernel TCP: its fds are set UNMANAGED and it
// leaves the table, so its calls never reach the core again. An
// accelerated socket keeps its kernel TCP connection open beside the
// stream (getsockname, getpeername, options, close detection stay the
// kernel's); the kernel never carries its payload.
type Socket struct {
	p      *Process
	family int

	state      atomic.Uint32 // sockState
	nonblock   atomic.Bool
	shutRD     atomic.Bool
	shutWR     atomic.Bool
	rcvTimeo   atomic.Int64 // SO_RCVTIMEO in ns, 0: none
	sndTimeo   atomic.Int64
	rcvBuf     atomic.Int32  // SO_RCVBUF set by the program (kernel's effective bytes), 0: never (options.go)
	sndBuf     atomic.Int32  // SO_SNDBUF likewise
	errSeen    atomic.Bool   // ECONNRESET reported once: later reads see EOF, writes EPIPE
	rxRead     atomic.Uint64 // bytes the program has read (arrived = this + buffered)
	nospace    atomic.Uint32 // bumped each time a write found no room (EPOLLET's wakeup)
	abortClose atomic.Bool   // SO_LINGER {1, 0}: close resets
	pendShut   atomic.Int32  // shutdown(how) while the verdict was pending: how+1 or-ed (1 read, 2 write)
	peerFin    atomic.Bool   // the peer's FIN was seen (EOF read or polled)

	stream      streamSlot    // accelerated: the stream
	spre        streamPreempt // a shared-channel stream's CPU preemption (preempt.go)
	wake        wakeup        // accelerated: how blocked threads sleep
	rdWait      *wait.Waiter  // spin policy of blocking reads
	wrWait      *wait.Waiter  // and writes
	attend      attendance
	obs         atomic.Pointer[connObs]        // accelerated: the connection's counters (observe.go)
	sw          atomic.Uint32                  // switch to kernel TCP at a fork (forkswitch.go): swNone...
	reqSent     atomic.Bool                    // this end wrote its switch REQ
	watchUrgent atomic.Bool                    // the switch watcher waits for a REQ's urgent byte (switchwatch.go)
	watchArmed  atomic.Bool                    // the core put the socket in the watcher's set (not a sleep: switchwatch.go)
	swPre       []byte                         // the start of the peer's REQ a drain read (direct.Conn.Quiet); the switch run's
	tcpOpts     atomic.Pointer[direct.TCPOpts] // the program's TCP_NODELAY and TCP_CORK, kept aside while rings may go (tcpopts.go)
	swFork      atomic.Bool                    // a fork waits for the switch: this end returns its unread bytes

	mu          sync.Mutex
	fds         []int                        // +checklocks:mu; fds naming the socket
	ghost       int                          // +checklocks:mu; 1 + the protected duplicate that holds a connection the program closed while a fork child holds it (forkkeep.go), 0: none
	listenAddr  netip.AddrPort               // +checklocks:mu; registered address
	registered  bool                         // +checklocks:mu
	plainMark   int                          // +checklocks:mu; 1 + the fd marked for the interposer's plain accepts (plainaccept.go), 0: none
	unlisted    rendezvous.Reason            // +checklocks:mu; listening but not registered: why (its accepts fall back with it)
	pend        *pendingConnect              // +checklocks:mu; connecting: what the verdict decides
	end         *channelEnd                  // +checklocks:mu; accelerated: the channel end
	epolls      map[*epollSet]struct{}       // +checklocks:mu; emulated epoll sets holding it
	early       []byte                       // +checklocks:mu; written before the verdict (early.go)
	earlyN      atomic.Int32                 // len(early), read without the lock
	earlyPush   bool                         // +checklocks:mu; pushEarly started
	earlyArea   int                          // +checklocks:mu; written before the verdict into a direct offer's area (early.go)
	earlyKernel int                          // +checklocks:mu; written on the kernel socket by a deferred connection before its pull (early.go)
	earlyFin    bool                         // +checklocks:mu; shutdown(SHUT_WR) waits for the early bytes (closeWriteLocked)
	earlySent   struct{ bytes, msgs uint64 } // +checklocks:mu; sends taken before the verdict, for the stats
	group       bool                         // +checklocks:mu; registered as a group listener (deferred acceptance)
	acc         *acceptedConn                // +checklocks:mu; adopted: the connection to resolve at first use
	setup       connSetup                    // +checklocks:mu; a connector's setup, judged at close (shortconn.go; SDPSHIM_SHORT_CONN only)
	names       connNames                    // +checklocks:mu; the connection's addresses as its setup learned them (observe.go)
}

// connSetup is when a connector's connect() began and when the connection
// became accelerated (nowNS; 0: not yet), to where, and whether it is the
// short-lived rule's probe.
type connSetup struct {
	dst         netip.AddrPort
	began, done int64
	probe       bool
}

// connNames are a connection's local and remote addresses as the setup
// learned them (from the program's connect, the kernel's accept or a
// getsockname it made anyway), so that registering the connection asks
// the kernel no more; an invalid one, or a local one without a port, is
// asked for then.
type connNames struct {
	local, peer netip.AddrPort
}

// sockState is a Socket's place in its state machine.
type sockState uint32

const (
	sockCreated sockState = iota
	sockListening
	sockConnecting
	sockAccelerated
	sockFallback
	sockClosed
	sockAdopted // accepted on a group listener (or inherited), not resolved yet
)

func (st sockState) String() string {
	return [...]string{"created", "listening", "connecting", "accelerated", "fallback", "closed", "adopted"}[st]
}

func (s *Socket) getState() sockState { return sockState(s.state.Load()) }

func (s *Socket) setState(st sockState) { s.state.Store(uint32(st)) }

// newSocket makes a Socket for fd.
func (p *Process) newSocket(fd, family int, nonblock bool) *Socket {
	s := &Socket{p: p, family: family, fds: []int{fd}}
	s.nonblock.Store(nonblock)
	p.fds.set(fd, &fdEntry{sock: s})
	return s
}

// accelerate turns s into an accelerated socket carried by st on end e.
// Called with s.mu held or before s is published.
//
// +checklocks:s.mu
func (s *Socket) accelerateLocked(e *channelEnd, st dataStream) {
	s.end = e
	if s.setup.began != 0 && s.setup.done == 0 {
		s.setup.done = nowNS()
	}
	if s.wake.word == nil {
		s.wake.init(s.p, s.p.words.get())
	}
	s.rdWait = wait.NewWaiter(s.p.policy())
	s.wrWait = wait.NewWaiter(s.p.policy())
	s.preemptStreamLocked(st)
	st.SetNonblock(true) // the shim blocks, in the kernel (wake.go)
	st.SetNotify(s.wake.ring)
	s.stream.Store(st)
	s.applyBuffers(st) // after the store: a setsockopt meanwhile applies its size itself
	s.setState(sockAccelerated)
	s.ringLocked() // the early bytes' publish may ring the peer
	s.flushEarlyLocked(st)
	if sh := s.pendShut.Load(); sh != 0 {
		s.shutRD.Store(sh&1 != 0)
		if sh&2 != 0 {
			s.closeWriteLocked(st)
		}
	}
	s.p.mu.Lock()
	s.p.live[s] = struct{}{}
	s.p.forkWorkLocked()
	s.p.mu.Unlock()
	s.openStatsLocked(e, st)
	if ds, ok := st.(*directStream); ok {
		s.adoptDirectLocked(ds)
		s.p.trimSoon()
	}
	if len(s.fds) > 0 {
		s.p.watchSwitchFD(s, s.fds[0]) // a peer's fork switches it to kernel TCP (forkswitch.go)
	}
	// A thread asleep on what the connection waited for (the rendezvous
	// connection, just read and closed) finds it accelerated.
	s.wake.wakeEverything()
	if _, ok := st.(*directStream); ok {
		s.wake.direct.Store(true) // the interposer answers its polls from now on
	}
}

// fallBackLocked makes s plain kernel TCP: every fd of it UNMANAGED, out of
// the table.
//
// +checklocks:s.mu
func (s *Socket) fallBackLocked() {
	if len(s.fds) > 0 {
		s.p.unwatchSwitch(s, s.fds[0]) // a deferral's watch (deferred.go)
		s.tcpOptsRelease(s.fds[0])     // the program's TCP_NODELAY and TCP_CORK (a switched direct connection)
	}
	if len(s.early) > 0 && len(s.fds) > 0 {
		s.earlyToKernelLocked(s.fds[0])
	}
	if sh := s.pendShut.Load(); sh != 0 && len(s.fds) > 0 {
		// shutdown while the verdict was pending: the kernel's FIN goes
		// after the early bytes. sh-1: 1 SHUT_RD, 2 SHUT_WR, 3 SHUT_RDWR.
		unix.Shutdown(s.fds[0], int(sh)-1)
	}
	s.setState(sockFallback)
	for _, fd := range s.fds {
		s.p.fds.take(fd)
		s.p.host.SetFDState(fd, FDUnmanaged)
	}
	s.fds = nil
	if s.wake.word == nil {
		return
	}
	// Threads asleep on it wake and find plain TCP. Epoll sets holding s
	// take its entry into their kernel list before its eventfd, which
	// they may be waiting on, closes.
	s.wake.wakeEverything()
	if len(s.epolls) == 0 {
		s.wake.release(s.p)
		return
	}
	sets := s.epollsLocked()
	go func() {
		for _, set := range sets {
			set.handOver(s)
		}
		s.wake.release(s.p)
	}()
}

// reportReset marks the connection's reset as reported to the program and
// returns whether it already was (ECONNRESET once, then EOF and EPIPE).
// A direct connection keeps the mark in its handle, which the
// interposer's calls share.
func (s *Socket) reportReset() bool {
	if ds := s.direct(); ds != nil {
		return ds.conn.ErrSeen()
	}
	return s.errSeen.Swap(true)
}

// resetReported reports whether reportReset was called.
func (s *Socket) resetReported() bool {
	if ds := s.direct(); ds != nil {
		return ds.conn.ErrSeenNow()
	}
	return s.errSeen.Load()
}

// noSpace counts the writes that found no room (the shim's and, on the
// direct path, the interposer's): EPOLLET's writable edge.
func (s *Socket) noSpace() uint32 {
	n := s.nospace.Load()
	if ds := s.direct(); ds != nil {
		n += uint32(ds.conn.NoSpace())
	}
	return n
}

// arrived returns the bytes that have arrived on the stream so far (read
// or buffered): it grows with every arrival, which EPOLLET reports.
func (s *Socket) arrived() uint64 {
	st := s.stream.Load()
	if st == nil {
		return 0
	}
	if ds, ok := st.(*directStream); ok {
		return ds.conn.Arrived()
	}
	for {
		r := s.rxRead.Load()
		b := st.Buffered()
		if s.rxRead.Load() == r {
			return r + uint64(b)
		}
	}
}

// epollsLocked returns the emulated epoll sets holding s.
//
// +checklocks:s.mu
func (s *Socket) epollsLocked() []*epollSet {
	sets := make([]*epollSet, 0, len(s.epolls))
	for set := range s.epolls {
		sets = append(sets, set)
	}
	return sets
}

// fdsLocked returns a copy of the fds naming s.
//
// +checklocks:s.mu
func (s *Socket) fdsLocked() []int { return append([]int(nil), s.fds...) }
