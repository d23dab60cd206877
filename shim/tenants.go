package shim

import "sync"

// tenantBoard is this process's descriptor of its user's tenant board
// (preload/c/tenant.h): through it the blocking bulk sends of the
// process's direct connections take turns with those of the user's other
// processes (stream-level preemption between processes; docs/direct.md,
// "Tenants"). Opened on the first direct connection with preemption on,
// and kept (protected, close-on-exec, at a high number) for the life of
// the process; a process that could not open it (logged) does without
// for its life.
type tenantBoard struct {
	once sync.Once
	fd   int // -1: none (the run directory refused it; logged)
}

// board returns the descriptor of the tenant board, opening it on first
// use; -1 when there is none.
func (p *Process) board() int {
	b := &p.tenants
	b.once.Do(func() {
		b.fd = -1
		n, err := p.rendezvousNode()
		if err != nil {
			return // no rendezvous, no direct connection either
		}
		// At one of the core's high numbers, protected, as its other fds
		// that cannot move: the handles keep the number, so a program's
		// dup2 onto it gets EBUSY (evict.go).
		fd, err := n.OpenBoard()
		if err != nil {
			p.log.WithError(err).Warn("no tenant board: bulk sends neither take turns with other processes' nor pause for their small messages")
			return
		}
		b.fd = fd
	})
	return b.fd
}
