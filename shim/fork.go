package shim

import (
	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// Fork. A fork child never enters this runtime (it would hang): the C
// fork_child hook (preload/entry/fork.c) runs there instead, and the
// interposer sets every inherited fd UNMANAGED. What the parent does:
//
//   - Listeners: a child may accept on an inherited listener (pre-fork
//     servers), and offers this process answered would then never be
//     claimed, stalling each connector until its offer expires. So after
//     fork() every registered listener is unregistered for good: its
//     connections stay on kernel TCP (counted as peer-not-shimmed by the
//     connectors, as fork-exec-decline by this process's accepts). After
//     posix_spawn and vfork only the listeners the child inherits (no
//     FD_CLOEXEC) are. This happens before the fork (ForkPrepare).
//   - Accelerated connections the child inherits (all after fork(), those
//     with an fd without FD_CLOEXEC after posix_spawn) are switched to
//     kernel TCP before the child exists, with the peer's help, without
//     losing a byte (forkswitch.go): parent and child then share a plain
//     kernel socket, whose holders the kernel counts. Each is counted as
//     a fork-exec-decline fallback.

// ForkPrepare is the fork_prepare hook. Before the child exists: the
// listeners it inherits are unregistered (no offer answered from now on
// can be accepted by the child: a connection whose offer this process
// answered before is still one the child may take, a narrow window left
// open), then the inherited connections go to kernel TCP (bounded by
// switchDeadline each, in parallel).
func (p *Process) ForkPrepare(kind int) {
	p.mu.Lock()
	var ls []*Socket
	for s := range p.listeners {
		ls = append(ls, s)
	}
	p.mu.Unlock()
	for _, s := range ls {
		if kind != ForkFork && !s.inheritable() {
			continue
		}
		s.mu.Lock()
		p.log.WithField("listen", s.listenAddr).Debug("listener shared with a child process: unregistered")
		s.unregisterLocked()
		s.unlisted = rendezvous.ReasonForkDecline // the parent's own accepts count it
		s.mu.Unlock()
	}
	p.switchForFork(kind)
}

// ForkParent is the fork_parent hook: pid is the child, or -errno.
// ForkPrepare did the work.
func (p *Process) ForkParent(kind, pid int) {}
