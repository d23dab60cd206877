package shim

import (
	"golang.org/x/sys/unix"
)

// Fork. A fork child never enters this runtime (it would hang): the C
// fork_child hook (preload/entry/forkchild.c) runs there instead, and the
// interposer sets every inherited fd UNMANAGED. What the parent does:
//
//   - Listeners: a child may accept on an inherited listener (pre-fork
//     servers), and offers this process answered would then never be
//     claimed, stalling each connector until its offer expires. So after
//     fork() every registered listener is unregistered for good: its
//     connections stay on kernel TCP (counted as peer-not-shimmed by the
//     connectors). After posix_spawn only the listeners the child
//     inherits (no FD_CLOEXEC) are.
//   - Accelerated connections stay the parent's. The child's copy of such
//     an fd is plain kernel TCP on which the peer sends nothing (see
//     preload/entry/doc.go for what a child that uses one sees).

// ForkPrepare is the fork_prepare hook.
func (p *Process) ForkPrepare(kind int) {}

// ForkParent is the fork_parent hook: pid is the child, or -errno.
func (p *Process) ForkParent(kind, pid int) {
	if pid <= 0 {
		return
	}
	p.mu.Lock()
	var ls []*Socket
	for s := range p.listeners {
		ls = append(ls, s)
	}
	p.mu.Unlock()
	for _, s := range ls {
		s.mu.Lock()
		inherited := kind == ForkFork
		if !inherited && len(s.fds) > 0 {
			for _, fd := range s.fds {
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
					inherited = true
				}
			}
		}
		if inherited {
			p.log.WithField("listen", s.listenAddr).Debug("listener shared with a child process: unregistered")
			s.unregisterLocked()
		}
		s.mu.Unlock()
	}
}
