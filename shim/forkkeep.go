package shim

import (
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// Connections kept accelerated across fork(). Switching every connection
// a child inherits to kernel TCP before the fork (forkswitch.go) made a
// process that forks children which never use them lose its acceleration
// for good: redis-server's BGSAVE child, a worker pool's children, a
// fork-exec. A direct connection holds nothing in this process's memory
// (its bytes and cursors are in the area), so one whose fds are all
// close-on-exec is kept instead, and switched only if the child makes a
// call on it that it cannot answer over the area itself:
//
//   - ForkPrepare makes a request pair (SOCK_SEQPACKET) for the fork,
//     watches its end here and gives the child's end to the interposer
//     (host ForkKeep), which closes it in this process after fork();
//   - the child goes on over the area by itself where it can (the data
//     calls, poll, select, the common socket options:
//     preload/c/forkkeep.c); a call it cannot answer there (epoll_ctl,
//     dup, ...) sends a request with a pipe's write end; keptRequest
//     switches every connection kept at that fork, as ForkPrepare would
//     have, and answers on the pipe;
//   - the pair's end reads EOF once no process holds the child's end any
//     more (the child and its own children exited, exec'd or switched):
//     the fork is forgotten;
//   - while a fork that kept a connection is not forgotten, the child may
//     hold the kernel socket. This process's last close of it keeps it
//     open as a ghost (a protected duplicate, its stream as it was) until
//     no child holds it: the child's closes are told here (dropMsg), and
//     the request end's close says the child and its children are gone.
//     Then the ghost closes as the program's close would have, after
//     whatever either process sent. A child that forks in turn (forkMsg)
//     can no longer tell when its family let go: its ghosts switch to
//     kernel TCP, whose socket counts its holders, and so does this
//     process's exit (nobody could switch for the child after it).
//
// Connections with an fd an exec keeps, on other channel modes, or with
// bytes in this process (written before the verdict) are switched at the
// fork as before.

// keptFork is one fork whose child holds connections kept accelerated.
type keptFork struct {
	fd     int               // this end of the request pair (protected)
	id     int32             // its id in the switch watcher's set
	socks  map[*Socket][]int // under Process.mu: kept at the fork, with the fds the child still holds of each
	forked bool              // under Process.mu: the child forked, so its closes no longer tell
}

// forkKeepHost is a Host whose interposer can keep connections across a
// fork (the child's requests, preload/c/forkkeep.c).
type forkKeepHost interface {
	// KeepsForks reports whether ForkKeep is available (an older
	// interposer lacks it: every connection switches at the fork).
	KeepsForks() bool
	// ForkKeep gives the interposer the request pair of the fork about
	// to happen: the child's end, and this process's (which the child
	// closes, so that its request fails at once when this process is
	// gone).
	ForkKeep(fd, mine int)
}

// What a child sends: keepRequest (with a pipe's write end) asks for the
// switch; dropMsg (then the fd's number, 4 bytes in the machine's order)
// says it closed an inherited fd; forkMsg, that it forked.
var (
	keepRequest = [8]byte{'S', 'D', 'P', 'k', 'e', 'e', 'p', '1'}
	dropMsg     = [8]byte{'S', 'D', 'P', 'd', 'r', 'o', 'p', '1'}
	forkMsg     = [8]byte{'S', 'D', 'P', 'f', 'o', 'r', 'k', '1'}
)

// keepable reports whether s can stay accelerated in this process while
// a fork() child shares its kernel socket.
func (s *Socket) keepable() bool {
	return s.getState() == sockAccelerated && s.direct() != nil && s.sw.Load() == swNone &&
		s.earlyN.Load() == 0 && !s.inheritable()
}

// keepForFork picks the connections a fork() child may share accelerated
// and makes their request pair; it returns them (nil: none kept; the set
// is only read from now on).
func (p *Process) keepForFork() map[*Socket]struct{} {
	h, ok := p.host.(forkKeepHost)
	if !ok || !h.KeepsForks() || p.swatch.epoll(p) < 0 {
		return nil
	}
	socks := p.liveSockets()
	k := 0
	for _, s := range socks {
		if s.keepable() {
			socks[k] = s
			k++
		}
	}
	if k == 0 {
		return nil
	}
	socks = socks[:k]
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.log.WithError(err).Warn("fork: no request pair; the child's connections switch to kernel TCP now")
		return nil
	}
	mine, child := highFD(pair[0]), highFD(pair[1])
	p.protect(mine)
	p.protect(child)
	f := &keptFork{fd: mine, socks: make(map[*Socket][]int, len(socks))}
	kept := make(map[*Socket]struct{}, len(socks))
	for _, s := range socks {
		s.mu.Lock()
		f.socks[s] = slices.Clone(s.fds)
		if len(s.fds) > 0 {
			// Taken off here, in this process's memory: the child's
			// copy of the handle rings without taking them (tcpopts.go).
			s.tcpOptsLocked().Hold(s.fds[0])
		}
		s.mu.Unlock()
		kept[s] = struct{}{}
		if ds := s.direct(); ds != nil {
			ds.noReuse.Store(true) // the child's copy of the handle outlives this process's (areapool.go)
		}
	}
	if !p.swatch.watchFork(f) {
		p.closeFD(mine)
		p.closeFD(child)
		return nil
	}
	p.mu.Lock()
	if p.kept == nil {
		p.kept = map[*keptFork]struct{}{}
	}
	p.kept[f] = struct{}{}
	p.mu.Unlock()
	h.ForkKeep(child, mine)
	p.count("fork.keep")
	p.log.WithField("connections", len(socks)).Debug("fork: connections kept accelerated for the child")
	return kept
}

// keptEvent handles what arrived on a kept fork's request end: one
// message, or its end. It reports whether there may be more.
func (p *Process) keptEvent(f *keptFork) bool {
	var b [len(dropMsg) + 4]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(f.fd, b[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err == unix.EAGAIN || err == unix.EINTR {
		return false
	}
	if n == 0 || err != nil {
		p.forgetFork(f) // nobody holds the child's end any more
		return false
	}
	fds, perr := fdhook.Rights(oob[:oobn])
	head := [8]byte(b[:8])
	switch {
	case n == len(keepRequest) && head == keepRequest && perr == nil && len(fds) == 1:
		go p.keptRequest(f, fds[0])
	case n == len(b) && head == dropMsg && perr == nil && len(fds) == 0:
		p.keptDrop(f, int(int32(binary.NativeEndian.Uint32(b[8:]))))
	case n == len(forkMsg) && head == forkMsg && perr == nil && len(fds) == 0:
		p.keptForked(f)
	default:
		for _, fd := range fds {
			unix.Close(fd)
		}
		p.log.Warn("fork: a malformed message on a fork child's request pair was ignored")
	}
	return true
}

// settleForks takes what the kept forks' children said that the switch
// watcher has not read yet (their closes, their ends), so that an exit
// switches only what a child still holds.
func (p *Process) settleForks() {
	p.mu.Lock()
	forks := slices.Collect(maps.Keys(p.kept))
	p.mu.Unlock()
	for _, f := range forks {
		for i := 0; i < 1024 && p.keptEvent(f); i++ {
		}
	}
}

// keptRequest switches every connection kept at fork f to kernel TCP (the
// child uses one), then answers with a byte on reply (the child reads the
// pipe's end without one as this process's death).
func (p *Process) keptRequest(f *keptFork, reply int) {
	defer func() {
		unix.Write(reply, []byte{1})
		unix.Close(reply)
	}()
	p.count("fork.keep.switch")
	p.log.Debug("fork: the child uses a kept connection: switching them to kernel TCP")
	p.mu.Lock()
	socks := make([]*Socket, 0, len(f.socks))
	for s := range f.socks {
		if s.getState() == sockAccelerated {
			socks = append(socks, s)
		}
	}
	p.mu.Unlock()
	switchAsForkers(socks)
	for _, s := range socks {
		p.endGhost(s) // the program closed it: the child's copy is plain now
	}
}

// keptDrop handles the child's close of fd, one it inherited at fork f: a
// connection the child no longer holds leaves the fork, and a ghost no
// child holds any more ends.
func (p *Process) keptDrop(f *keptFork, fd int) {
	var gone *Socket
	p.mu.Lock()
	for s, fds := range f.socks {
		if i := slices.Index(fds, fd); i >= 0 && !f.forked {
			if fds = slices.Delete(fds, i, i+1); len(fds) > 0 {
				f.socks[s] = fds
			} else {
				delete(f.socks, s)
				gone = s
			}
			break
		}
	}
	p.mu.Unlock()
	if gone != nil {
		if shared, _ := p.sharedWithChild(gone); !shared {
			p.endGhost(gone)
		}
	}
}

// keptForked handles the child's fork: its closes no longer tell when the
// connections are let go, so the ghosts it shares switch to kernel TCP now
// (the kernel's socket counts their holders), and a later last close here
// switches rather than leaving a ghost.
func (p *Process) keptForked(f *keptFork) {
	p.log.Debug("fork: the child forked: connections the program closed switch to kernel TCP")
	p.mu.Lock()
	f.forked = true
	var ghosts []*Socket
	for s := range f.socks {
		if s.isGhost() {
			ghosts = append(ghosts, s)
		}
	}
	p.mu.Unlock()
	if len(ghosts) == 0 {
		return
	}
	go func() {
		switchAsForkers(ghosts)
		for _, s := range ghosts {
			p.endGhost(s)
		}
	}()
}

// forgetFork drops a fork whose child's end nobody holds any more; the
// ghosts that no other child holds end.
func (p *Process) forgetFork(f *keptFork) {
	p.mu.Lock()
	_, live := p.kept[f]
	delete(p.kept, f)
	socks := slices.Collect(maps.Keys(f.socks))
	p.mu.Unlock()
	if !live {
		return
	}
	p.swatch.unwatchFork(f)
	p.closeFD(f.fd)
	for _, s := range socks {
		if shared, _ := p.sharedWithChild(s); !shared {
			p.endGhost(s)
		}
	}
}

// sharedWithChild reports whether a fork child may still hold s's kernel
// socket (a fork that kept s is not forgotten yet, and its child did not
// close every fd of it), and whether such a child forked.
func (p *Process) sharedWithChild(s *Socket) (shared, forked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.kept {
		if _, ok := f.socks[s]; ok {
			shared = true
			forked = forked || f.forked
		}
	}
	return shared, forked
}

// switchShared switches the connections among socks that a fork child
// may still hold to kernel TCP (in parallel) and returns the others.
func (p *Process) switchShared(socks []*Socket) []*Socket {
	var shared []*Socket
	k := 0
	for _, s := range socks {
		if held, _ := p.sharedWithChild(s); held && s.getState() == sockAccelerated {
			shared = append(shared, s)
			continue
		}
		socks[k] = s
		k++
	}
	switchAsForkers(shared)
	return socks[:k]
}

// ghost keeps s open after the program closed its last fd (fd), for a
// fork child that holds it: a protected duplicate takes fd's place, fd
// leaves the process's table and the epoll sets, and the switch watcher
// watches the duplicate. false when no duplicate could be made.
func (p *Process) ghost(s *Socket, fd int) bool {
	kfd, err := dupHigh(fd)
	if err != nil {
		return false
	}
	p.protect(kfd)
	p.fds.take(fd)
	s.mu.Lock()
	s.fds = []int{kfd}
	s.ghost = 1 + kfd
	if ds := s.direct(); ds != nil {
		ds.detach(fd)
	}
	s.ringLocked() // before the interposer closes fd
	sets := s.epollsLocked()
	s.mu.Unlock()
	for _, set := range sets {
		set.forgetSocket(s)
	}
	if w := &p.swatch; w.epfd >= 0 {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	p.watchSwitchFD(s, kfd)
	p.count("fork.keep.ghost")
	p.log.Debug("fork: the program closed a connection its child holds: kept open for the child")
	// The child may have let go meanwhile (forgetFork, keptDrop), or
	// forked (keptForked): they change the fork, then look for ghosts;
	// this marks the ghost, then looks at the forks. One of the two sees
	// the other. A child that forked before the program's close reached
	// here (closeShared saw no fork yet) makes the ghost switch, as
	// keptForked does with those it finds.
	switch shared, forked := p.sharedWithChild(s); {
	case !shared:
		p.endGhost(s)
	case forked:
		go func() {
			switchAsForkers([]*Socket{s})
			p.endGhost(s)
		}()
	}
	return true
}

// isGhost reports whether s is a ghost.
func (s *Socket) isGhost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ghost != 0
}

// endGhost closes ghost s once no child holds it: as the program's close
// would have (a FIN after what either process sent, or a reset when bytes
// arrived that nobody read), or only its duplicate when it was switched
// to kernel TCP meanwhile. Not a ghost: nothing. A switch that is still
// running (the peer's, or this process's own for the child) is waited for
// in the background.
func (p *Process) endGhost(s *Socket) {
	s.mu.Lock()
	kfd := s.ghost - 1
	if kfd >= 0 && s.sw.Load() != swNone && s.getState() == sockAccelerated {
		s.mu.Unlock()
		go func() {
			deadline := time.Now().Add(2 * switchDeadline)
			for s.sw.Load() != swNone && s.getState() == sockAccelerated && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			p.endGhostNow(s)
		}()
		return
	}
	s.mu.Unlock()
	p.endGhostNow(s)
}

// endGhostNow is endGhost once no switch runs.
func (p *Process) endGhostNow(s *Socket) {
	s.mu.Lock()
	kfd := s.ghost - 1
	if kfd < 0 {
		s.mu.Unlock()
		return
	}
	s.ghost = 0
	accelerated := s.getState() == sockAccelerated && len(s.fds) == 1 && s.fds[0] == kfd
	s.fds = nil
	s.ringLocked() // no ring goes out on kfd once this returns
	s.mu.Unlock()
	p.unwatchSwitch(s, kfd)
	if accelerated {
		s.kernelFINFirst(kfd)
		s.close()
	}
	p.closeFD(kfd)
	p.log.Debug("fork: a connection no process holds any more closed")
}
