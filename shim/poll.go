package shim

import (
	"errors"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Readiness of accelerated sockets for poll, ppoll, select and pselect
// (the interposer's poll engine calls Poll; epoll.go uses pollEvents too).
// Level-triggered, with the kernel's TCP answers (net/ipv4/tcp.c
// tcp_poll):
//
//	POLLIN|POLLRDNORM  bytes buffered, EOF (the peer's FIN, or SHUT_RD), or an error
//	POLLRDHUP          the peer's FIN arrived (or SHUT_RD)
//	POLLOUT|POLLWRNORM a write would make progress, or after SHUT_WR
//	POLLHUP            both directions shut, or reset / peer gone
//	POLLERR            reset / peer gone
//
// A connecting socket is not readable or writable until its kernel
// connect completed and the verdict arrived; when it falls back to kernel
// TCP the kernel's answer for its fd is used.

// ringPoll is what a poll sleep over a direct socket waits for on the
// socket itself: a ring of the peer (a byte), the peer's end, the urgent
// byte of a switch request.
const ringPoll = unix.POLLIN | unix.POLLPRI | pollRDHUP

const (
	pollRDNORM = 0x40
	pollWRNORM = 0x100
	pollWRBAND = 0x200
	pollRDHUP  = 0x2000
	pollIn     = unix.POLLIN | pollRDNORM
	pollOut    = unix.POLLOUT | pollWRNORM
	pollAlways = unix.POLLERR | unix.POLLHUP | unix.POLLNVAL
)

// pollEvents returns the revents of s for events, and when it is zero the
// descriptor to sleep on for a change (fd, events), or fd -1 when only
// this process's events can change it (the thread's kick, wake.go).
func (s *Socket) pollEvents(fd int, events int16) (revents int16, waitFD int, waitEv int16) {
	return s.pollEventsAt(fd, events, false)
}

// pollEventsAt is pollEvents; pumped: the caller moved the stream's
// channel (mux.Channel.Progress, with a flush when events asks for
// POLLOUT) just before, and the stream's state is read without pumping
// again (a scan over many sockets of one channel pumps it once).
func (s *Socket) pollEventsAt(fd int, events int16, pumped bool) (revents int16, waitFD int, waitEv int16) {
	if s.sw.Load() != swNone {
		return s.switchPoll(fd, events) // switching to kernel TCP (forkswitch.go)
	}
	st, state := s.streamNow()
	if st == nil {
		if state != sockConnecting {
			return kernelPoll(fd, events), fd, events
		}
		s.mu.Lock()
		r := s.settleLocked()
		connected := r.stream == nil && s.pend != nil && s.pend.kernelDone
		writable, kernelFull := false, false
		if connected && events&pollOut != 0 {
			writable, kernelFull = s.earlyWritableLocked()
		}
		s.mu.Unlock()
		switch {
		case r.fallback:
			return kernelPoll(fd, events), fd, events
		case writable:
			// The kernel connect completed, the acceptor has not claimed
			// the connection yet: writable, as the kernel's socket is,
			// while early writes have room (early.go).
			return events & pollOut, -1, 0
		case kernelFull && events&pollIn == 0:
			// Early writes go onto the kernel socket, which is full:
			// writable again when it is (or the puller took them).
			return 0, fd, unix.POLLOUT
		case r.stream == nil:
			return 0, r.waitFD, r.waitEvents
		}
		st, pumped = r.stream, false // its channel may not have been moved
	}
	if ds, ok := st.(*directStream); ok && !s.shutRD.Load() && s.earlyN.Load() == 0 {
		// The interposer's own answer (poll.c), for the same state.
		rev := ds.conn.Revents(events)
		if rev&pollRDHUP != 0 {
			s.peerFin.Store(true)
		}
		if rev != 0 {
			return rev, -1, 0
		}
		return 0, fd, ringPoll // the peer's ring, its end, a switch request
	}
	var rev int16
	readReady, writeReady := st.ReadReady, st.WriteReady
	if pumped {
		readReady, writeReady = st.ReadReadyNow, st.WriteReadyNow
	}
	if readReady() || s.shutRD.Load() {
		var one [1]byte
		n, err := st.Peek(one[:])
		switch {
		case n > 0:
			rev |= pollIn
		case errors.Is(err, io.EOF):
			s.peerFin.Store(true)
			fallthrough
		case s.shutRD.Load():
			rev |= pollIn | pollRDHUP
			if s.shutWR.Load() {
				rev |= unix.POLLHUP
			}
		case err != nil && !errors.Is(err, wire.ErrWouldBlock):
			rev |= pollIn | pollRDHUP | unix.POLLHUP
			if !s.resetReported() {
				rev |= unix.POLLERR
			}
		}
	}
	if events&(pollOut|pollWRBAND) != 0 {
		if s.shutWR.Load() || rev&unix.POLLHUP != 0 || (s.earlyFlushed(st) && writeReady()) {
			rev |= pollOut
		} else {
			s.nospace.Add(1) // as tcp_poll sets SOCK_NOSPACE
		}
	}
	return rev & (events | pollAlways), -1, 0
}

// streamFailed reports whether the stream ended in a reset or the peer's
// death (an error other than EOF).
func (s *Socket) streamFailed() bool {
	st := s.stream.Load()
	if st == nil {
		return false
	}
	var one [1]byte
	n, err := st.Peek(one[:])
	return n == 0 && err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, wire.ErrWouldBlock)
}

// kernelPoll asks the kernel about fd without waiting.
func kernelPoll(fd int, events int16) int16 {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: events}}
	if n, err := unix.Poll(pfd, 0); n <= 0 || err != nil {
		return 0
	}
	return pfd[0].Revents
}

// Poll is the poll hook. fds is the caller's whole set (revents zeroed);
// Poll sets revents of the entries whose fd the interposer marks MANAGED
// and returns how many it set non-zero. When none is ready after the
// wait policy's polling it registers the calling thread's attendance on
// the accelerated sockets and fills wait with what to sleep on (direct
// sockets themselves, the descriptors connecting sockets wait for; the
// engine adds the thread's kick eventfd); nwait is how many. The
// thread's next Poll ends that attendance.
func (p *Process) Poll(fds, wait []unix.PollFd, timeout time.Duration) (ready, nwait int) {
	tid := unix.Gettid()
	p.tids.end(tid)
	type entry struct {
		i          int
		s          *Socket
		waitFD     int   // when not ready: what its sleep waits for (-1: only the kick)
		waitEv     int16 // (recorded by the last check: nothing is asked again)
		connecting bool  // at the attendance: kicked by its settling, watched, not attended
	}
	var managed []entry
	var sets []int32            // emulated epoll fds not ready: slept on themselves
	var kernelFDs []unix.PollFd // the kernel's: looked at while polling (timeout != 0)
	for i := range fds {
		if fds[i].Fd < 0 {
			continue
		}
		if p.host.FDState(int(fds[i].Fd)) != FDManaged {
			if timeout != 0 {
				kernelFDs = append(kernelFDs, unix.PollFd{Fd: fds[i].Fd, Events: fds[i].Events})
			}
			continue
		}
		if s := p.fds.socket(int(fds[i].Fd)); s != nil {
			managed = append(managed, entry{i: i, s: s})
		} else if p.fds.epoll(int(fds[i].Fd)) != nil {
			fds[i].Revents = p.epollPollEvents(int(fds[i].Fd), fds[i].Events)
			if fds[i].Revents != 0 {
				ready++
			} else {
				sets = append(sets, fds[i].Fd)
			}
		}
	}
	// An emulated epoll fd polls readable in the kernel when its kernel
	// list has an event (its sockets' rings and its kick, written for
	// every event once the set is polled, and its kernel fds): the sleep
	// includes it.
	addSets := func(nwait int) int {
		for _, fd := range sets {
			if nwait < len(wait) {
				wait[nwait] = unix.PollFd{Fd: fd, Events: unix.POLLIN}
				nwait++
			}
		}
		return nwait
	}
	if ready > 0 {
		return ready, 0
	}
	if len(managed) == 0 {
		return 0, addSets(0)
	}
	scan := func() bool {
		n := 0
		for k := range managed {
			e := &managed[k]
			f := &fds[e.i]
			f.Revents, e.waitFD, e.waitEv = e.s.pollEvents(int(f.Fd), f.Events)
			if f.Revents != 0 {
				n++
			}
		}
		ready = n
		return n > 0
	}
	if scan() {
		return ready, 0
	}
	if timeout != 0 {
		// Ready sockets end it; a kernel fd ready, the deadline, or the
		// budget spent go on to the engine's kernel sleep, which reports
		// them. The kernel fds are looked at every kernelEvery polls, as
		// EpollWait does.
		polls := 0
		check := func() bool {
			if scan() {
				return true
			}
			kernel := false
			if len(kernelFDs) > 0 && polls%kernelEvery == 0 {
				k, _ := unix.Poll(kernelFDs, 0)
				kernel = k > 0
			}
			polls++
			return kernel
		}
		p.pollWaiter().Wait(check, kernelBell{}, pollDeadline(timeout))
		if ready > 0 {
			return ready, 0
		}
	}
	bell := 0 // the thread's, which direct sockets arm with (bells.go)
	if h, ok := p.host.(pollBellHost); ok {
		bell = h.PollBell()
	}
	for {
		// Attend the accelerated sockets, and the connecting ones, which
		// their offer's end and their settling (which another thread may
		// do: pushEarly) wake (wakeEverything): the thread's kick
		// eventfd is in every sleep of the engine (preload/c/pollkick.c).
		// A direct socket's rings are read (the kernel's poll reports
		// them until then), then it is armed: the peer rings it once.
		var attend, watch []*Socket
		for k := range managed {
			e := &managed[k]
			e.connecting = false
			if st, state := e.s.streamNow(); st != nil {
				attend = append(attend, e.s)
			} else if state == sockConnecting {
				watch = append(watch, e.s)
				e.connecting = true
				e.s.armPost(bell) // a posted offer's verdict rings the bell (post.go)
			} else {
				continue
			}
			if ds := e.s.direct(); ds != nil {
				fd := int(fds[e.i].Fd)
				if ds.conn.Drain(fd) {
					e.s.switchRequested()
				}
				e.s.armDirect(ds, fd, fds[e.i].Events, bell)
			}
		}
		p.tids.begin(tid, attend, watch)
		if scan() {
			p.tids.end(tid)
			return ready, 0
		}
		again := false
		for _, e := range managed {
			if e.connecting && e.s.stream.Load() != nil {
				again = true // accelerated since: its events need the attendance
			}
		}
		if again {
			p.tids.end(tid)
			continue
		}
		nwait := 0
		add := func(fd int, ev int16) {
			if fd >= 0 && nwait < len(wait) {
				wait[nwait] = unix.PollFd{Fd: int32(fd), Events: ev}
				nwait++
			}
		}
		for _, e := range managed {
			if e.waitFD >= 0 {
				add(e.waitFD, e.waitEv)
			}
		}
		return 0, addSets(nwait)
	}
}
