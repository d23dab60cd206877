package shim

import (
	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
)

// Connections kept accelerated across fork(). Switching every connection
// a child inherits to kernel TCP before the fork (forkswitch.go) made a
// process that forks children which never use them lose its acceleration
// for good: redis-server's BGSAVE child, a worker pool's children, a
// fork-exec. A direct connection holds nothing in this process's memory
// (its bytes and cursors are in the area), so one whose fds are all
// close-on-exec is kept instead, and switched only if the child uses it:
//
//   - ForkPrepare makes a request pair (SOCK_SEQPACKET) for the fork,
//     watches its end here and gives the child's end to the interposer
//     (host ForkKeep), which closes it in this process after fork();
//   - the child's interposer leaves the fds it inherited untouched; the
//     first call on one of them sends a request with a pipe's write end
//     (preload/c/forkkeep.c); keptRequest switches every connection kept
//     at that fork, as ForkPrepare would have, and answers on the pipe;
//   - the pair's end reads EOF once no process holds the child's end any
//     more (the child and its own children exited, exec'd or switched):
//     the fork is forgotten;
//   - while a fork that kept a connection is not forgotten, the child may
//     hold the kernel socket: this process's last close of it, and its
//     exit, switch it first instead of ending the stream (the kernel
//     would keep the connection open for the child).
//
// Connections with an fd an exec keeps, on other channel modes, or with
// bytes in this process (written before the verdict) are switched at the
// fork as before.

// keptFork is one fork whose child holds connections kept accelerated.
type keptFork struct {
	fd    int                  // this end of the request pair (protected)
	id    int32                // its id in the switch watcher's set
	socks map[*Socket]struct{} // kept at the fork (a set: every last close looks one up)
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

// keepRequest is what a child sends (with a pipe's write end).
var keepRequest = [8]byte{'S', 'D', 'P', 'k', 'e', 'e', 'p', '1'}

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
	f := &keptFork{fd: mine, socks: make(map[*Socket]struct{}, len(socks))}
	for _, s := range socks {
		f.socks[s] = struct{}{}
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
	return f.socks
}

// keptEvent handles what arrived on a kept fork's request end.
func (p *Process) keptEvent(f *keptFork) {
	var b [len(keepRequest)]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(f.fd, b[:], oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if n == 0 || err != nil {
		p.forgetFork(f) // nobody holds the child's end any more
		return
	}
	fds, perr := fdhook.Rights(oob[:oobn])
	if b != keepRequest || perr != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		p.log.Warn("fork: a malformed request on a fork child's request pair was ignored")
		return
	}
	go p.keptRequest(f, fds[0])
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
	var socks []*Socket
	for s := range f.socks {
		if s.getState() == sockAccelerated {
			socks = append(socks, s)
		}
	}
	switchAsForkers(socks)
}

// forgetFork drops a fork whose child's end nobody holds any more.
func (p *Process) forgetFork(f *keptFork) {
	p.mu.Lock()
	_, live := p.kept[f]
	delete(p.kept, f)
	p.mu.Unlock()
	if !live {
		return
	}
	p.swatch.unwatchFork(f)
	p.closeFD(f.fd)
}

// sharedWithChild reports whether a fork child may still hold s's kernel
// socket (a fork that kept s is not forgotten yet).
func (p *Process) sharedWithChild(s *Socket) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range p.kept {
		if _, ok := f.socks[s]; ok {
			return true
		}
	}
	return false
}

// switchShared switches the connections among socks that a fork child
// may still hold to kernel TCP (in parallel) and returns the others.
func (p *Process) switchShared(socks []*Socket) []*Socket {
	var shared []*Socket
	k := 0
	for _, s := range socks {
		if s.getState() == sockAccelerated && p.sharedWithChild(s) {
			shared = append(shared, s)
			continue
		}
		socks[k] = s
		k++
	}
	switchAsForkers(shared)
	return socks[:k]
}
