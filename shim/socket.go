package shim

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/sdpshim/sdpshim/core"
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

	state    atomic.Uint32 // sockState
	nonblock atomic.Bool
	shutRD   atomic.Bool
	shutWR   atomic.Bool
	rcvTimeo atomic.Int64 // SO_RCVTIMEO in ns, 0: none
	sndTimeo atomic.Int64
	errSeen  atomic.Bool // ECONNRESET reported once: later reads see EOF, writes EPIPE

	stream atomic.Pointer[core.Stream] // accelerated: the stream
	wake   wakeup                      // accelerated: how blocked threads sleep
	rdWait *core.Waiter                // spin policy of blocking reads
	wrWait *core.Waiter                // and writes
	attend attendance

	mu         sync.Mutex
	fds        []int                  // +checklocks:mu; fds naming the socket
	listenAddr netip.AddrPort         // +checklocks:mu; registered address
	registered bool                   // +checklocks:mu
	pend       *pendingConnect        // +checklocks:mu; connecting: what the verdict decides
	end        *channelEnd            // +checklocks:mu; accelerated: the channel end
	epolls     map[*epollSet]struct{} // +checklocks:mu; emulated epoll sets holding it
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
)

func (st sockState) String() string {
	return [...]string{"created", "listening", "connecting", "accelerated", "fallback", "closed"}[st]
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
func (s *Socket) accelerateLocked(e *channelEnd, st *core.Stream) {
	s.end = e
	if s.wake.word == nil {
		s.wake.init(s.p.words.get())
	}
	s.rdWait = core.NewWaiter(s.p.policy())
	s.wrWait = core.NewWaiter(s.p.policy())
	st.SetNonblock(true) // the shim blocks, in the kernel (wake.go)
	st.SetNotify(s.wake.ring)
	s.stream.Store(st)
	s.setState(sockAccelerated)
	s.p.mu.Lock()
	s.p.live[s] = struct{}{}
	s.p.mu.Unlock()
	s.p.count("accelerated")
}

// fallBackLocked makes s plain kernel TCP: every fd of it UNMANAGED, out of
// the table.
//
// +checklocks:s.mu
func (s *Socket) fallBackLocked() {
	s.setState(sockFallback)
	for _, fd := range s.fds {
		s.p.fds.take(fd)
		s.p.host.SetFDState(fd, FDUnmanaged)
	}
	s.fds = nil
	if s.wake.word != nil {
		s.wake.release(s.p) // threads asleep on it wake and find plain TCP
	}
}

// fdsLocked returns a copy of the fds naming s.
//
// +checklocks:s.mu
func (s *Socket) fdsLocked() []int { return append([]int(nil), s.fds...) }
