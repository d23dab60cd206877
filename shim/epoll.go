package shim

import (
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// epoll over accelerated sockets, level-triggered, with EPOLLET and
// EPOLLONESHOT approximated (the exact semantics are issue 5). An epoll
// fd that holds an accelerated (or connecting) socket is MANAGED: its
// interest list entries for such sockets live here, while the kernel's
// epoll holds, under a token of ours, what to wake on: the socket's
// eventfd (accelerated) or the descriptors a connecting socket waits for.
// Kernel fds in the same set stay in the kernel's list, untouched. A
// socket in an emulated set stays attended (its progress goroutines awake)
// while it is there.

// epollSet is one emulated epoll instance.
type epollSet struct {
	p  *Process
	fd int // the epoll fd the kernel registrations were made on

	mu      sync.Mutex
	entries map[int]*epollEntry // +checklocks:mu; by the socket's fd
	tokens  map[uint64]*epollEntry
	fds     int // fds naming the set (dup); +checklocks:mu
}

// epollEntry is one accelerated socket in a set.
type epollEntry struct {
	fd       int
	sock     *Socket
	events   uint32
	data     uint64
	token    uint64
	lastGen  uint32
	reported bool
	disabled bool // EPOLLONESHOT fired
	attended bool // the socket's eventfd efd is registered, the stream attended
	efd      int
	tcpReg   bool // the socket's own fd is registered (connect pending)
	answerFD int  // the rendezvous connection registered (verdict pending)
}

const (
	epollET      = unix.EPOLLET
	epollOneShot = unix.EPOLLONESHOT
)

// EpollCtl is the epoll_ctl hook. It emulates entries for accelerated and
// connecting sockets and passes everything else to the kernel.
func (p *Process) EpollCtl(epfd, op, fd int, events uint32, data uint64) int64 {
	s := p.fds.socket(fd)
	set := p.fds.epoll(epfd)
	if s == nil || (s.getState() != sockAccelerated && s.getState() != sockConnecting) {
		if set != nil && op != unix.EPOLL_CTL_ADD {
			set.mu.Lock()
			_, ours := set.entries[fd]
			set.mu.Unlock()
			if ours {
				return set.ctl(op, fd, nil, events, data)
			}
		}
		return Pass
	}
	if set == nil {
		if op != unix.EPOLL_CTL_ADD {
			return negErrno(unix.ENOENT)
		}
		// Validate epfd as the kernel would, before taking it over.
		if fd == epfd {
			return negErrno(unix.EINVAL)
		}
		if e := checkEpollFD(epfd); e != 0 {
			return negErrno(e)
		}
		set = &epollSet{p: p, fd: epfd, entries: map[int]*epollEntry{}, tokens: map[uint64]*epollEntry{}, fds: 1}
		p.fds.set(epfd, &fdEntry{ep: set})
		p.host.SetFDState(epfd, FDManaged)
		p.mu.Lock()
		p.epolls[set] = struct{}{}
		p.mu.Unlock()
	}
	return set.ctl(op, fd, s, events, data)
}

func (set *epollSet) ctl(op, fd int, s *Socket, events uint32, data uint64) int64 {
	set.mu.Lock()
	defer set.mu.Unlock()
	e := set.entries[fd]
	switch op {
	case unix.EPOLL_CTL_ADD:
		if e != nil {
			return negErrno(unix.EEXIST)
		}
		e = &epollEntry{fd: fd, sock: s, events: events, data: data, token: newToken(), efd: -1, answerFD: -1}
		set.entries[fd] = e
		set.tokens[e.token] = e
		s.mu.Lock()
		if s.epolls == nil {
			s.epolls = map[*epollSet]struct{}{}
		}
		s.epolls[set] = struct{}{}
		s.mu.Unlock()
		set.armLocked(e)
		return 0
	case unix.EPOLL_CTL_MOD:
		if e == nil {
			return negErrno(unix.ENOENT)
		}
		e.events, e.data, e.disabled, e.reported = events, data, false, false
		return 0
	case unix.EPOLL_CTL_DEL:
		if e == nil {
			return negErrno(unix.ENOENT)
		}
		set.removeLocked(e)
		e.sock.mu.Lock()
		delete(e.sock.epolls, set)
		e.sock.mu.Unlock()
		return 0
	}
	return negErrno(unix.EINVAL)
}

// armLocked makes the kernel epoll wake for e: on the socket's eventfd
// once it is accelerated (and attends it); while it connects, on its TCP
// fd until the kernel connect completes, then on the rendezvous
// connection until the verdict (that one is never removed explicitly: it
// is closed after the verdict, which removes it, and its number may be
// reused by then).
//
// +checklocks:set.mu
func (set *epollSet) armLocked(e *epollEntry) {
	s := e.sock
	if st := s.stream.Load(); st != nil {
		if e.tcpReg {
			unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
			e.tcpReg = false
		}
		if !e.attended {
			efd := s.wake.eventFD(set.p)
			if efd < 0 || set.add(efd, unix.EPOLLIN, e.token) != nil {
				return
			}
			e.efd, e.attended = efd, true
			s.wake.pollers.Add(1)
			st.Attend()
		}
		return
	}
	_, fd, ev := s.pollEvents(e.fd, unix.POLLOUT)
	switch {
	case fd < 0:
	case fd == e.fd:
		if !e.tcpReg && set.add(fd, uint32(ev), e.token) == nil {
			e.tcpReg = true
		}
	case fd != e.answerFD:
		if e.tcpReg {
			unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
			e.tcpReg = false
		}
		if set.add(fd, uint32(ev), e.token) == nil {
			e.answerFD = fd
		}
	}
}

// add registers fd in the kernel epoll under token.
func (set *epollSet) add(fd int, events uint32, token uint64) error {
	ev := unix.EpollEvent{Events: events}
	setEpollData(&ev, token)
	return unix.EpollCtl(set.fd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// removeLocked drops e from the set.
//
// +checklocks:set.mu
func (set *epollSet) removeLocked(e *epollEntry) {
	if e.tcpReg {
		unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
	}
	if e.attended {
		unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.efd, nil)
		e.attended = false
		e.sock.endAttend(1, false)
	}
	delete(set.entries, e.fd)
	delete(set.tokens, e.token)
}

// toKernelLocked hands the entry of a socket that fell back to kernel TCP
// to the kernel's interest list, as the program asked for it.
//
// +checklocks:set.mu
func (set *epollSet) toKernelLocked(e *epollEntry) {
	set.removeLocked(e)
	ev := unix.EpollEvent{Events: e.events}
	setEpollData(&ev, e.data)
	unix.EpollCtl(set.fd, unix.EPOLL_CTL_ADD, e.fd, &ev)
}

// forgetFD drops the entry of a socket fd that is being closed.
func (set *epollSet) forgetFD(fd int, s *Socket) {
	set.mu.Lock()
	if e := set.entries[fd]; e != nil && e.sock == s {
		set.removeLocked(e)
	}
	set.mu.Unlock()
}

// EpollWait is the epoll_wait hook. nkernel < 0: before sleeping, report
// what is ready now (> 0) or 0 to let the interposer sleep in the kernel;
// nkernel >= 0: the kernel returned ev[:nkernel]; drop our tokens' events,
// add the ready sockets, return the count (0: sleep again).
func (p *Process) EpollWait(epfd int, ev []unix.EpollEvent, nkernel int) int64 {
	set := p.fds.epoll(epfd)
	if set == nil {
		return Pass
	}
	n := 0
	if nkernel > 0 {
		set.mu.Lock()
		for _, k := range ev[:nkernel] {
			if _, ours := set.tokens[epollData(&k)]; !ours {
				ev[n] = k
				n++
			}
		}
		set.mu.Unlock()
	}
	n += set.collect(ev[n:])
	return int64(n)
}

// collect writes the ready entries' events into ev and returns how many.
func (set *epollSet) collect(ev []unix.EpollEvent) int {
	set.mu.Lock()
	defer set.mu.Unlock()
	n := 0
	for _, e := range set.entries {
		if n == len(ev) {
			break
		}
		if e.disabled {
			continue
		}
		s := e.sock
		if s.getState() == sockFallback {
			set.toKernelLocked(e)
			continue
		}
		set.armLocked(e)
		gen := uint32(0)
		if s.stream.Load() != nil {
			s.wake.drain()
			gen = s.wake.gen()
		}
		rev, _, _ := s.pollEvents(e.fd, int16(e.events&0xffff))
		if rev == 0 {
			e.reported = false
			continue
		}
		if e.events&epollET != 0 && e.reported && gen == e.lastGen {
			continue // edge-triggered: nothing new since the last report
		}
		e.reported, e.lastGen = true, gen
		if e.events&epollOneShot != 0 {
			e.disabled = true
		}
		ev[n] = unix.EpollEvent{Events: uint32(uint16(rev))}
		setEpollData(&ev[n], e.data)
		n++
	}
	return n
}

// epollPollEvents answers poll on an emulated epoll fd: readable when an
// entry is ready (kernel entries are not looked at).
func (p *Process) epollPollEvents(epfd int, events int16) int16 {
	set := p.fds.epoll(epfd)
	if set == nil {
		return 0
	}
	var ev [1]unix.EpollEvent
	if set.collectPeek(ev[:]) {
		return events & unix.POLLIN
	}
	return kernelPoll(epfd, events)
}

// collectPeek reports whether an entry is ready, without side effects on
// edge-triggered or one-shot entries.
func (set *epollSet) collectPeek(ev []unix.EpollEvent) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, e := range set.entries {
		if e.disabled {
			continue
		}
		if rev, _, _ := e.sock.pollEvents(e.fd, int16(e.events&0xffff)); rev != 0 {
			return true
		}
	}
	return false
}

// close releases the set when its last fd closes.
func (set *epollSet) closeFD() {
	set.mu.Lock()
	set.fds--
	last := set.fds == 0
	var entries []*epollEntry
	if last {
		for _, e := range set.entries {
			entries = append(entries, e)
			set.removeLocked(e)
		}
	}
	set.mu.Unlock()
	if !last {
		return
	}
	for _, e := range entries {
		e.sock.mu.Lock()
		delete(e.sock.epolls, set)
		e.sock.mu.Unlock()
	}
	set.p.mu.Lock()
	delete(set.p.epolls, set)
	set.p.mu.Unlock()
}

func setEpollData(ev *unix.EpollEvent, v uint64) {
	ev.Fd = int32(uint32(v))
	ev.Pad = int32(uint32(v >> 32))
}

func epollData(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// checkEpollFD returns EBADF or EINVAL when fd is not an open epoll fd.
func checkEpollFD(fd int) unix.Errno {
	var buf [64]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	switch {
	case err == unix.ENOENT:
		return unix.EBADF
	case err != nil:
		return 0 // no /proc: the kernel registration below will tell
	case string(buf[:n]) != "anon_inode:[eventpoll]":
		return unix.EINVAL
	}
	return 0
}
