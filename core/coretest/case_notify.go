package coretest

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/verbs"
)

// NotifyFD: an armed CQ wakes epoll on its NotifyFD at its next
// completion; AckNotify makes the fd quiet again; Arm while a completion
// is already queued (not yet polled) fires at once. Looped with local
// WRITE completions in both orders (post then arm, arm then post) and with
// RECV completions caused by the peer's SENDs.

func notifyRounds(s *side) int {
	if s.short {
		return 60
	}
	return 250
}

func notifyA(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.recvRegion()
	src := s.region(64, 0)
	rbuf := s.region(64, verbs.AccessLocalWrite)
	sw, rw := s.watch(c.scq), s.watch(c.rcq)

	s.must(c.scq.AckNotify(), "AckNotify with nothing pending")
	if readable(c.scq.NotifyFD()) {
		s.fatalf("NotifyFD of a fresh CQ is readable")
	}
	write := func(id uint64) {
		s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, 64)}, RemoteAddr: dst.At(0), RemoteKey: dst.Key})
	}
	for i := 0; i < notifyRounds(s); i++ {
		id := uint64(i)
		switch i % 4 {
		case 0: // arm, complete, wake; re-arm with it still queued
			s.must(c.scq.Arm(), "Arm")
			write(id)
			s.waitNotify(sw, "an armed CQ got a completion")
			s.must(c.scq.AckNotify(), "AckNotify")
			if readable(c.scq.NotifyFD()) {
				s.fatalf("round %d: NotifyFD still readable after AckNotify", i)
			}
			s.must(c.scq.Arm(), "Arm with a completion queued")
			s.waitNotify(sw, "Arm while a completion is queued")
			s.must(c.scq.AckNotify(), "AckNotify")
			s.one(c.scq, id, verbs.OpWrite, verbs.StatusSuccess)
		case 1, 2: // post, then arm after a random pause: either clause fires
			write(id)
			for k := s.rng.IntN(8); k > 0; k-- {
				runtime.Gosched()
			}
			s.must(c.scq.Arm(), "Arm")
			s.waitNotify(sw, "Arm racing a completion")
			s.must(c.scq.AckNotify(), "AckNotify")
			s.one(c.scq, id, verbs.OpWrite, verbs.StatusSuccess)
		case 3: // the peer's SEND completes a RECV on an armed CQ
			s.postRecv(c, &verbs.RecvRequest{ID: id, SGEs: []verbs.SGE{sge(rbuf, 0, 64)}})
			s.must(c.rcq.Arm(), "Arm")
			s.sendWords(1)
			s.waitNotify(rw, "an armed recv CQ got the peer's SEND")
			s.must(c.rcq.AckNotify(), "AckNotify")
			s.one(c.rcq, id, verbs.OpRecv, verbs.StatusSuccess)
		}
	}
	s.sendWords(0)
}

func notifyB(s *side) {
	c := s.connect(verbs.QPConfig{})
	dst := s.region(64, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	s.sendRegion(dst)
	src := s.region(64, 0)
	for id := uint64(0); s.recvWords(1)[0] != 0; id++ {
		s.postSend(c, &verbs.SendRequest{ID: id, Op: verbs.OpSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{sge(src, 0, 16)}})
		s.one(c.scq, id, verbs.OpSend, verbs.StatusSuccess)
	}
}

// watcher is an epoll instance watching one CQ's NotifyFD.
type watcher struct{ ep int }

func (w watcher) Close() error { return unix.Close(w.ep) }

func (s *side) watch(cq verbs.CompletionQueue) watcher {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	s.must(err, "epoll_create1")
	w := watcher{ep}
	s.own("epoll", w)
	fd := cq.NotifyFD()
	s.must(unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}), "epoll_ctl ADD NotifyFD %d", fd)
	return w
}

// waitNotify waits, up to the deadline, for epoll to report the fd.
func (s *side) waitNotify(w watcher, what string) {
	ev := make([]unix.EpollEvent, 1)
	for {
		ms := msUntil(s.deadline)
		if ms == 0 {
			s.fatalf("deadline passed waiting for NotifyFD: %s (lost wakeup)", what)
		}
		n, err := unix.EpollWait(w.ep, ev, ms)
		if err == unix.EINTR {
			continue
		}
		s.must(err, "epoll_wait")
		if n > 0 {
			return
		}
	}
}

// readable reports whether fd is readable right now.
func readable(fd int) bool {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&unix.POLLIN != 0
	}
}
