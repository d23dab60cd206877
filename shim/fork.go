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
//     claimed, stalling each connector until its offer expires. So no
//     process answers for it in advance any more. After fork(), when the
//     child runs a core of its own (childCores), every registered
//     listener becomes a group listener (deferred_accept.go): connectors
//     defer, and whichever process first uses an accepted connection
//     claims it; the child registers its own group entry when it first
//     touches the listener. Otherwise (a child without a core, and after
//     posix_spawn and vfork: an exec'd program sees inherited fds as
//     plain) the listeners the child inherits are unregistered for good:
//     their connections stay on kernel TCP (counted as peer-not-shimmed
//     by the connectors, as fork-exec-decline by this process's accepts).
//     This happens before the fork (ForkPrepare).
//   - Accelerated connections the child inherits (all after fork(), those
//     with an fd without FD_CLOEXEC after posix_spawn) are switched to
//     kernel TCP before the child exists, with the peer's help, without
//     losing a byte (forkswitch.go): parent and child then share a plain
//     kernel socket, whose holders the kernel counts. Each is counted as
//     a fork-exec-decline fallback. Except, after fork(), direct
//     connections whose fds are all close-on-exec: they stay accelerated
//     and switch only if the child uses one (forkkeep.go).

// forkWorkHost is a Host whose interposer calls fork_prepare only when the
// core says a fork needs it: without it, every fork of a process running
// the core entered the runtime (a postmaster's fork per connection).
type forkWorkHost interface {
	// ForkWork says whether forks need ForkPrepare from now on.
	ForkWork(need bool)
}

// forkReadyHost is a Host that can make ahead of time what a first fork
// needs (the core copy fork children load).
type forkReadyHost interface {
	// ForkReady makes it now; it may take a few ms.
	ForkReady()
}

// forkReady has the interposer make the core copy for fork children in
// the background: a process that listens on a socket of its own is a
// server, and servers fork (workers, backends, redis-server's BGSAVE);
// its children then share one copy from the first. (A worker that shares
// its parent's listener makes none: it rarely forks.) The interposer
// makes the copy once per process; later calls return at once.
func (p *Process) forkReady() {
	if h, ok := p.host.(forkReadyHost); ok {
		go h.ForkReady()
	}
}

// forkWorkLocked tells the interposer whether a fork needs ForkPrepare:
// while a connection is accelerated (it must switch to kernel TCP) or a
// registered listener is not a group listener yet (it must become one, or
// be withdrawn).
//
// +checklocks:p.mu
func (p *Process) forkWorkLocked() {
	if h, ok := p.host.(forkWorkHost); ok {
		h.ForkWork(len(p.live) > 0 || p.ungrouped > 0)
	}
}

// ForkPrepare is the fork_prepare hook. Before the child exists: the
// listeners it inherits become group listeners, or are unregistered (no
// offer answered from now on can be accepted by the child: a connection
// whose offer this process answered before is still one the child may
// take, a narrow window left open), then the inherited connections go to
// kernel TCP (bounded by switchDeadline each, in parallel).
func (p *Process) ForkPrepare(kind int) {
	ls := p.registeredListeners()
	groups := p.childCores()
	for _, s := range ls {
		if kind != ForkFork && !s.inheritable() {
			continue
		}
		s.mu.Lock()
		if (kind == ForkFork && groups && s.makeGroupLocked()) || s.group {
			// Group listeners stay so (a spawned child that accepts
			// on it makes its connectors wait out deferDeadline).
			s.mu.Unlock()
			continue
		}
		p.log.WithField("listen", s.listenAddr).Debug("listener shared with a child process: unregistered")
		s.unregisterLocked()
		s.unlisted = rendezvous.ReasonForkDecline // the parent's own accepts count it
		s.mu.Unlock()
	}
	var kept map[*Socket]struct{}
	if kind == ForkFork {
		kept = p.keepForFork()
	}
	p.switchForFork(kind, kept)
}

// makeGroupLocked turns the registered listener s into a group listener
// (its entry rewritten: connectors defer from now on); false when it is
// not registered or the entry cannot be written.
//
// +checklocks:s.mu
func (s *Socket) makeGroupLocked() bool {
	if !s.registered {
		return false
	}
	if s.group {
		return true
	}
	p := s.p
	p.mu.Lock()
	node := p.node
	p.mu.Unlock()
	if node == nil || node.SetGroup(s.listenAddr) != nil {
		return false
	}
	s.group = true
	p.mu.Lock()
	p.ungrouped--
	p.forkWorkLocked()
	p.mu.Unlock()
	p.log.WithField("listen", s.listenAddr).Debug("listener shared with a child process: group listener")
	return true
}
