package shim

import (
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
	"github.com/sdpshim/sdpshim/shim/config"
)

// Early data. A connected socket whose acceptor has not claimed the
// connection yet (the verdict comes at its accept) takes writes as the
// kernel's socket would, up to earlyMax bytes, so that a program that
// writes before the peer accepts (one thread doing both, or a client
// sending its request at once) neither blocks nor sees EAGAIN.
//
// On the direct path the offer's area exists already and the acceptor's
// process holds its memfd: the bytes go into the area at once
// (sendEarlyDirectLocked), so they outlive this process as a kernel
// socket's queue does; the acceptor that claims the connection reads them
// first, even when this process died meanwhile. When it does not claim it,
// they are taken back out of the area (takeBackEarlyLocked) and go onto the
// kernel socket before anything else. Only writes beyond the area's blocks
// (more small writes than it has blocks) wait in the socket's buffer.
//
// A deferred connection on the direct path has no area until a process
// pulls it: its writes go onto the kernel socket at once
// (sendEarlyKernelLocked), as kernel TCP's would, so that they outlive
// this process there too. Its pull's offer says how many went
// (offerMsg.early), and the puller moves them from its kernel socket into
// the area before its verdict (publishKernelEarly), ahead of anything
// this side sends on the area; a connection that falls back finds them on
// the kernel socket already. A write after the pull started and before
// the verdict waits for the verdict (earlyWaitsLocked), about a round
// trip, rather than return for bytes in this process's memory.
//
// Otherwise (the channel modes) they wait in a small
// buffer of the socket (s.early) and go first on the stream once the
// connection is accelerated (flushEarly, before any later write), or onto
// the kernel socket, before anything else, when it falls back.

// earlyMax bounds the early buffer (well under a loopback socket's
// default buffers, so a fallback can always hand it to the kernel).
const earlyMax = 64 << 10

// sendEarly takes a write while the verdict is pending. ok is false when
// the write is not for it (accelerated, plain, not connected yet, or the
// buffer is full): the caller goes on as usual.
func (s *Socket) sendEarly(bufs [][]byte) (n int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok = s.sendEarlyLocked(bufs)
	if n > 0 {
		// Counted in the connection's stats when it is accelerated
		// (openStatsLocked): it is not registered yet.
		s.earlySent.bytes += uint64(n)
		s.earlySent.msgs++
	}
	return n, ok
}

// +checklocks:s.mu
func (s *Socket) sendEarlyLocked(bufs [][]byte) (n int64, ok bool) {
	r := s.settleLocked()
	if r.stream != nil || r.fallback || s.pend == nil || !s.pend.kernelDone {
		return 0, false
	}
	if s.shutWR.Load() || s.pendShut.Load()&2 != 0 {
		return negErrno(unix.EPIPE), true
	}
	if s.earlyOnKernelLocked() {
		return s.sendEarlyKernelLocked(bufs)
	}
	if s.earlyWaitsLocked() {
		return 0, false // the caller waits for the verdict, as for a full send buffer
	}
	if ds := s.pend.direct; ds != nil && (s.pend.answer != nil || s.pend.post != nil) && len(s.early) == 0 {
		if n, ok := s.sendEarlyDirectLocked(ds, bufs); ok {
			return n, true
		}
	}
	room := earlyMax - s.earlyArea - len(s.early)
	if room <= 0 {
		return 0, false
	}
	total := 0
	for _, b := range bufs {
		take := min(len(b), room-total)
		s.early = append(s.early, b[:take]...)
		total += take
		if total == room {
			break
		}
	}
	s.earlyN.Store(int32(len(s.early)))
	s.startPushLocked()
	return int64(total), true
}

// startPushLocked starts pushEarly once, when something the program did
// while the verdict is pending must reach the peer without its next call:
// early bytes in the socket's buffer, a shutdown's FIN, or when a sleep
// of the program waits for a posted offer's verdict that the acceptor
// cannot ring (post.go, armPost). A deferred
// connection starts it when it is pulled (deferred.go).
//
// +checklocks:s.mu
func (s *Socket) startPushLocked() {
	if s.earlyPush || s.pend == nil || (s.pend.answer == nil && s.pend.post == nil) {
		return
	}
	if s.pend.post != nil {
		// A posted offer: the goroutine sleeps on the post (post.go).
		s.earlyPush = true
		go s.pushEarly(-1)
		return
	}
	// The goroutine polls a duplicate taken now: the answer's own fd
	// closes when a call of the program settles the socket, which may
	// come before the goroutine runs (it would then dup nothing, or
	// whatever took the number, and push nothing). Without one it polls
	// no fd and notices the verdict within a watchSlice.
	dup, err := dupHigh(s.pend.answer.Fd())
	if err != nil {
		dup = -1
	}
	s.earlyPush = true
	go s.pushEarly(dup)
}

// sendEarlyKernelLocked is sendEarly for a deferred connection on the
// direct path that no process pulled yet: the bytes go onto the kernel
// socket, without waiting, up to earlyKernelMax in all. ok is false when
// none went (that much is there already, or the kernel's buffer is full):
// the caller waits for the decision, as for a full send buffer.
//
// +checklocks:s.mu
func (s *Socket) sendEarlyKernelLocked(bufs [][]byte) (n int64, ok bool) {
	room := s.p.earlyKernelMax() - s.earlyKernel
	var iov [][]byte
	total := 0
	for _, b := range bufs {
		if take := min(len(b), room-total); take > 0 {
			iov = append(iov, b[:take])
			total += take
		}
	}
	if total == 0 {
		if room <= 0 {
			return 0, false
		}
		return 0, true // nothing to write, as the kernel's send of nothing
	}
	if s.earlyKernel == 0 {
		// Nagle and a cork would hold them in this socket, where the
		// puller waits for them (publishKernelEarly); the program's settings
		// are kept as for a direct connection (tcpopts.go), and go back
		// on the socket if it falls back.
		s.tcpOptsLocked().Hold(s.fds[0])
	}
	m, err := unix.SendmsgBuffers(s.fds[0], iov, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	switch {
	case m > 0:
		s.earlyKernel += m
		return int64(m), true
	case err == unix.EAGAIN || err == unix.EINTR:
		return 0, false
	case err != nil:
		return negErrno(errnoOf(err)), true
	}
	return 0, false
}

// earlyWritableLocked reports whether a write while the verdict is
// pending is taken now (poll's POLLOUT): on the kernel socket before a
// deferred connection's pull, in the early buffer after. kernelFull: it
// would be, but that socket is full (the fd to wait on for POLLOUT).
//
// +checklocks:s.mu
func (s *Socket) earlyWritableLocked() (ok, kernelFull bool) {
	switch {
	case s.earlyOnKernelLocked():
		if s.earlyKernel >= s.p.earlyKernelMax() {
			return false, false
		}
		ok = kernelPoll(s.fds[0], unix.POLLOUT)&unix.POLLOUT != 0
		return ok, !ok
	case s.earlyWaitsLocked():
		return false, false
	}
	return s.earlyN.Load() < earlyMax, false
}

// earlyWaitsLocked reports whether a write waits for the verdict: a
// deferred connection on the direct path whose pull is being answered,
// or whose early bytes went onto the kernel socket (the puller moves them
// into the area before its verdict, and the connector may send there
// only after it). Taking such a write into the socket's buffer would
// return for bytes in this process's memory only; it waits about a round
// trip instead, as for a full send buffer.
//
// +checklocks:s.mu
func (s *Socket) earlyWaitsLocked() bool {
	d := s.pend.def
	return d != nil && s.p.cfg.Channel == config.ChannelDirect && (s.pend.answer == nil || s.earlyKernel > 0)
}

// earlyOnKernelLocked reports whether writes go onto the kernel socket
// now: a deferred connection on the direct path that nobody pulled yet.
//
// +checklocks:s.mu
func (s *Socket) earlyOnKernelLocked() bool {
	d := s.pend.def
	return d != nil && s.pend.answer == nil && d.state == defWaiting && s.p.cfg.Channel == config.ChannelDirect
}

// earlyKernelMax is how many bytes a deferred connection writes on the
// kernel socket before its pull: what the area its offer will carry holds
// (the puller moves them all into it before its verdict), at most
// earlyMax.
func (p *Process) earlyKernelMax() int {
	return min(earlyMax, p.cfg.Blocks*(directSlot(p.cfg.BlockSize)-direct.HeaderSize))
}

// sendEarlyDirectLocked is sendEarly on the direct path: the bytes go
// into the offer's area, as a nonblocking send, up to earlyMax in all.
// When the area has no free block (many small writes: one block each),
// ok is false and the rest waits in the socket's buffer, behind them.
//
// +checklocks:s.mu
func (s *Socket) sendEarlyDirectLocked(ds *directStream, bufs [][]byte) (n int64, ok bool) {
	room := earlyMax - s.earlyArea
	total := 0
	for _, b := range bufs {
		if total == room {
			break
		}
		take := min(len(b), room-total)
		if take == 0 {
			continue
		}
		m, _, err := ds.conn.Send(b[:take], false)
		total += m
		if err != nil || m < take {
			break
		}
	}
	if total == 0 {
		return 0, false // full: the caller waits for the verdict
	}
	s.earlyArea += total
	return int64(total), true
}

// takeBackEarlyLocked moves the bytes that sendEarlyDirectLocked put into
// ds's area (nil: none), a connection the acceptor did not claim, to the
// front of the early buffer, for the kernel socket (fallBackLocked).
//
// +checklocks:s.mu
func (s *Socket) takeBackEarlyLocked(ds *directStream) {
	if ds == nil || s.earlyArea == 0 {
		return
	}
	back := ds.conn.TakeBack(s.earlyArea)
	if len(back) != s.earlyArea {
		s.p.log.WithFields(logrus.Fields{"written": s.earlyArea, "back": len(back)}).Warn("early bytes lost at fallback: the area held fewer")
	}
	s.early = append(back, s.early...)
	s.earlyN.Store(int32(len(s.early)))
	s.earlyArea = 0
}

// pushEarly delivers the early bytes without waiting for the program's
// next call: the peer may be waiting for them. It waits for the verdict
// on the rendezvous connection (dup, its own duplicate, which it closes;
// -1: none), settles the socket (accelerateLocked flushes), and keeps
// flushing while the stream has no room for the rest.
func (s *Socket) pushEarly(dup int) {
	if po := s.pendingPost(); po != nil {
		s.waitPost(po, time.Now().Add(closeVerdictWait))
	} else {
		waitFDWhile(dup, unix.POLLIN, func() bool { return s.getState() == sockConnecting && s.stream.Load() == nil })
	}
	if dup >= 0 {
		unix.Close(dup)
	}
	s.mu.Lock()
	if s.getState() == sockConnecting && len(s.fds) > 0 {
		s.settleLocked()
	}
	s.mu.Unlock()
	s.wake.wakeEverything() // a poller's early-buffer room may have changed
	waited := false
	for pause := 100 * time.Microsecond; s.earlyN.Load() > 0 && s.getState() == sockAccelerated; pause = min(2*pause, 10*time.Millisecond) {
		if st := s.stream.Load(); st != nil && s.earlyFlushed(st) {
			break
		}
		waited = true
		time.Sleep(pause)
	}
	if waited {
		// A poller asleep since before the socket was accelerated does
		// not attend its stream: only this says it is writable now.
		s.wake.wakeEverything()
	}
}

// flushEarlyLocked writes what it can of the early bytes onto st, without
// waiting; it reports whether none is left.
//
// +checklocks:s.mu
func (s *Socket) flushEarlyLocked(st dataStream) bool {
	for len(s.early) > 0 {
		n, err := st.Write(s.early)
		s.early = s.early[n:]
		if n == 0 || err != nil {
			break
		}
	}
	if len(s.early) == 0 {
		s.early = nil
		if s.earlyFin {
			// Before the interposer may send: it would not see the
			// shutdown otherwise.
			s.earlyFin = false
			st.CloseWrite()
		}
	}
	s.earlyN.Store(int32(len(s.early)))
	if len(s.early) == 0 {
		s.syncDirect() // the interposer may send now
	}
	return len(s.early) == 0
}

// closeWriteLocked is shutdown(SHUT_WR) of an accelerated socket: st's
// FIN, after the early bytes. While some still wait in the socket's
// buffer (the stream had no room for them yet: pushEarly keeps flushing
// them), the FIN waits too, and flushEarlyLocked sends it after the last
// of them; a FIN now would end the stream ahead of them and the peer
// would never read them.
//
// +checklocks:s.mu
func (s *Socket) closeWriteLocked(st dataStream) {
	s.shutWR.Store(true)
	if len(s.early) > 0 {
		s.earlyFin = true
		return
	}
	st.CloseWrite()
}

// earlyFlushed reports whether no early byte waits for st (flushing what
// it can first).
func (s *Socket) earlyFlushed(st dataStream) bool {
	if s.earlyN.Load() == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushEarlyLocked(st)
}

// closeWithEarly closes st once the early bytes still waiting went (in the
// background, as the kernel sends a closed socket's queue), or at once.
func (s *Socket) closeWithEarly(st dataStream, abort bool) {
	s.mu.Lock()
	rest := s.early
	s.early = nil
	s.earlyN.Store(0)
	s.mu.Unlock()
	if abort || len(rest) == 0 {
		if abort {
			st.Abort()
		} else {
			st.Close()
		}
		return
	}
	go func() {
		st.SetNonblock(false)
		st.SetWriteDeadline(time.Now().Add(earlyLinger))
		st.Write(rest)
		st.Close()
	}()
}

// earlyLinger bounds how long a closed socket's early bytes may wait for
// room on the stream.
const earlyLinger = 30 * time.Second

// earlyToKernelLocked hands the early bytes to the kernel socket fd of a
// connection that fell back: they go before anything the program writes
// next, waiting (up to earlyLinger) for room when the socket is
// nonblocking.
//
// +checklocks:s.mu
func (s *Socket) earlyToKernelLocked(fd int) {
	deadline := time.Now().Add(earlyLinger)
	for len(s.early) > 0 && time.Now().Before(deadline) {
		n, err := unix.Write(fd, s.early)
		if n > 0 {
			s.early = s.early[n:]
			continue
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			break
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		unix.Poll(pfd, 100)
	}
	if len(s.early) > 0 {
		s.p.log.WithField("bytes", len(s.early)).Warn("early bytes lost at fallback")
	}
	s.early = nil
	s.earlyN.Store(0)
}
