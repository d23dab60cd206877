package shim

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wait"
)

// switchWatch notices a peer's switch request (forkswitch.go) on the TCP
// socket beside an accelerated stream, whatever the program is doing:
// one epoll set per process (a protected fd) holds the TCP socket of
// every accelerated connection, one-shot, and one goroutine waits on it.
// The same set holds the request ends of forks that kept connections
// (forkkeep.go), and the TCP socket of a deferred connection while it
// waits for its PULL (watchDeferred).
// It waits for the connection's end (EPOLLRDHUP, a reset), not for
// bytes: a direct connection's peer rings the socket with zero bytes
// (direct.go). A direct connection's socket goes into the set at its
// first sleep (direct.Conn.WatchLater), not at its start: the end only
// matters to a thread asleep on the area, and every connection's close
// woke the watcher at the other end with its FIN (a thread of the
// runtime woken, and an epoll_ctl at each end, per connection). A switch request of a direct connection's peer marks the
// area and rings the watcher's bell (an eventfd, bell 0 of the bells
// every peer process is given, bells.go); only while the peer does not
// hold that bell does the watcher wait for the request's urgent byte
// (EPOLLPRI), which wakes its thread for every ring as well (the kernel
// wakes a socket's waiters for new bytes with EPOLLPRI in the mask):
// one context switch per ring.
type switchWatch struct {
	once  sync.Once
	epfd  int
	bell  int // the watcher's bell (registered under bellID), or -1
	mu    sync.Mutex
	next  int32
	socks map[int32]*Socket   // +checklocks:mu
	ids   map[*Socket]int32   // +checklocks:mu
	forks map[int32]*keptFork // +checklocks:mu; request ends of forks that kept connections (forkkeep.go)
}

// switchFDMin is the lowest number the watcher's epoll fd takes when the
// fd limit allows it.
const switchFDMin = 512

// bellID is the watcher's bell's id in its set (sockets and forks count
// from 1).
const bellID = 0

// watchSwitch adds the accelerated socket s (or arms it again).
func (p *Process) watchSwitch(s *Socket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fds) > 0 {
		p.watchSwitchFD(s, s.fds[0])
	}
}

// epoll returns the watcher's epoll fd, starting the watcher on first
// use; -1 when it cannot run.
func (w *switchWatch) epoll(p *Process) int {
	w.once.Do(func() {
		w.socks = map[int32]*Socket{}
		w.ids = map[*Socket]int32{}
		w.forks = map[int32]*keptFork{}
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err == nil {
			// Out of the low numbers programs size their tables by.
			if hi, e := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, switchFDMin); e == nil {
				unix.Close(fd)
				fd = hi
			}
		}
		if err != nil {
			w.epfd = -1
			p.log.WithError(err).Warn("switch watcher unavailable: a peer's fork leaves its connections to it stuck")
			return
		}
		p.protect(fd)
		w.epfd = fd
		w.bell = -1
		if b, err := p.newDirectEventFD(); err == nil {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: bellID}
			if unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, b, &ev) == nil {
				w.bell = b
				p.bells.setWatcher(b)
			} else {
				p.closeFD(b)
			}
		}
		go p.switchLoop()
	})
	return w.epfd
}

// watchSwitchFD is watchSwitch with s.mu held: fd is one of its fds.
func (p *Process) watchSwitchFD(s *Socket, fd int) {
	w := &p.swatch
	if w.epoll(p) < 0 {
		return
	}
	events := uint32(unix.EPOLLRDHUP)
	urgent := true
	ds := s.direct()
	if ds != nil {
		urgent = ds.conn.WatchUrgent()
	}
	if urgent {
		events |= unix.EPOLLPRI
	}
	s.watchUrgent.Store(urgent)
	later := false // the first sleep adds it (direct.Conn.WatchLater)
	if !urgent && ds != nil {
		id, _ := w.register(s)
		later = ds.conn.WatchLater(w.epfd, id)
	}
	if !later {
		w.arm(s, fd, events)
	}
	if ds != nil && ds.conn.SwitchRequested() && s.getState() == sockAccelerated {
		// The peer's bell rang before s was accelerated (watcherRung
		// passed it by): the mark in the area stays.
		go s.switchAsResponder()
	}
}

// watchDeferred adds s, a deferred connection (deferred.go) with socket
// fd, until a PULL comes: readable (the acceptor went on over kernel TCP)
// or failed, s.deferredEvent falls back. Its deadline is on the
// process's deadline queue. No goroutine waits per connection: one that
// did, blocked in poll(2), was started by every connect (a thread woken
// for it), kept sysmon ticking while it waited, and woke again at each
// end's FIN. It reports false when the watcher cannot run.
func (w *switchWatch) watchDeferred(p *Process, s *Socket, fd int) bool {
	return w.epoll(p) >= 0 && w.arm(s, fd, unix.EPOLLIN|unix.EPOLLRDHUP)
}

// register returns s's id in the set and whether it had one.
func (w *switchWatch) register(s *Socket) (int32, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, known := w.ids[s]
	if !known {
		w.next++
		id = w.next
		w.ids[s] = id
		w.socks[id] = s
	}
	return id, known
}

// arm puts fd, s's socket, in the set for events, one-shot: a socket
// seen before may be there already (armed again), a new one is added.
func (w *switchWatch) arm(s *Socket, fd int, events uint32) bool {
	id, known := w.register(s)
	s.watchArmed.Store(true)
	ev := unix.EpollEvent{Events: events | unix.EPOLLONESHOT, Fd: id}
	// A MOD of a new one would fail first.
	first, then := unix.EPOLL_CTL_MOD, unix.EPOLL_CTL_ADD
	if !known {
		first, then = then, first
	}
	if unix.EpollCtl(w.epfd, first, fd, &ev) == nil {
		return true
	}
	return unix.EpollCtl(w.epfd, then, fd, &ev) == nil
}

// watchFork watches the request end of a fork that kept connections
// (forkkeep.go), level-triggered: a request, or the end once nobody holds
// the child's end.
func (w *switchWatch) watchFork(f *keptFork) bool {
	w.mu.Lock()
	w.next++
	f.id = w.next
	w.forks[f.id] = f
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: f.id}
	if unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, f.fd, &ev) != nil {
		w.unwatchFork(f)
		return false
	}
	return true
}

// unwatchFork stops watching f's request end (before it is closed).
func (w *switchWatch) unwatchFork(f *keptFork) {
	w.mu.Lock()
	delete(w.forks, f.id)
	w.mu.Unlock()
	unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, f.fd, nil)
}

// unwatchSwitch forgets s, if it is watched; fd is one of its fds still
// open, or -1 (the kernel drops the registration when the socket's last
// holder closes).
func (p *Process) unwatchSwitch(s *Socket, fd int) {
	w := &p.swatch
	if w.socks == nil || w.epfd < 0 {
		return
	}
	w.mu.Lock()
	id, known := w.ids[s]
	if known {
		delete(w.ids, s)
		delete(w.socks, id)
	}
	w.mu.Unlock()
	added := false // by a sleep (WatchLater)
	if ds := s.direct(); ds != nil {
		added = ds.conn.WatchTake()
	}
	if known && fd >= 0 && (added || s.watchArmed.Load()) {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// switchLoop waits for the watcher's set parked in the Go runtime's
// poller (wait.ParkFD): a goroutine blocked in epoll_wait holds its P
// until sysmon takes it, and sysmon keeps ticking every 20 us while it
// does; opening and closing connections woke it several times each.
func (p *Process) switchLoop() {
	w := &p.swatch
	evs := make([]unix.EpollEvent, 64)
	var n int
	var err error
	park := wait.NewParkFD(w.epfd, func(fd int) bool {
		n, err = unix.EpollWait(fd, evs, 0)
		if err == unix.EINTR {
			n, err = 0, nil
		}
		return n > 0 || err != nil
	})
	for {
		if e := park.Wait(time.Time{}); e != nil && err == nil {
			err = e
		}
		if err != nil {
			p.log.WithError(err).Warn("switch watcher stopped")
			return
		}
		for _, ev := range evs[:n] {
			if ev.Fd == bellID {
				p.watcherRung()
				continue
			}
			w.mu.Lock()
			s, f := w.socks[ev.Fd], w.forks[ev.Fd]
			w.mu.Unlock()
			switch {
			case s != nil:
				p.switchEvent(s, ev.Events)
			case f != nil:
				p.keptEvent(f)
			}
		}
	}
}

// watcherRung answers the watcher's bell: a peer marked a switch request
// in a direct connection's area, or now holds the bell of a connection
// whose watch waits for the urgent byte (it is watched without it from
// now on). Rare (forks, a process pair's first connection): every
// connection is looked at.
func (p *Process) watcherRung() {
	w := &p.swatch
	var b [8]byte
	unix.Read(w.bell, b[:])
	w.mu.Lock()
	socks := make([]*Socket, 0, len(w.socks))
	for _, s := range w.socks {
		socks = append(socks, s)
	}
	w.mu.Unlock()
	for _, s := range socks {
		ds := s.direct()
		if ds == nil || s.getState() != sockAccelerated || s.sw.Load() != swNone {
			continue
		}
		if ds.conn.SwitchRequested() {
			go s.switchAsResponder()
		} else if s.watchUrgent.Load() && !ds.conn.WatchUrgent() {
			p.watchSwitch(s)
		}
	}
}

// switchEvent looks at what arrived on s's TCP socket (events): a
// deferred connection's first byte or failure (deferredEvent), a REQ's
// urgent byte starts the responder; the connection's end leaves it
// disarmed (the stream reports the end; a direct one is told here);
// anything else re-arms.
func (p *Process) switchEvent(s *Socket, events uint32) {
	if s.deferredEvent(events) {
		return
	}
	if s.getState() != sockAccelerated || s.sw.Load() != swNone {
		return
	}
	if events&unix.EPOLLPRI != 0 {
		// Read with s.mu held: the program's close of the fd waits for
		// the close hook, which takes s.mu first. Read out of band, the
		// byte is taken off the stream (the REQ's records stay in it).
		s.mu.Lock()
		if len(s.fds) > 0 {
			var b [1]byte
			unix.Recvfrom(s.fds[0], b[:], unix.MSG_OOB|unix.MSG_DONTWAIT)
		}
		s.mu.Unlock()
		go s.switchAsResponder()
		return
	}
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// The TCP connection ended: the peer process is gone (a direct
		// stream learns it only here; a channel's stream from its channel).
		if ds := s.direct(); ds != nil {
			ds.peerGone()
			// A sleeper the end woke may have looked before the area
			// said so (edge-triggered: the end rings only once).
			s.wake.wakeEverything()
		}
		return
	}
	p.watchSwitch(s)
}
