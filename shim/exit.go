package shim

import (
	"time"
)

// exitDrain bounds how long a process exit waits for its streams' bytes.
const exitDrain = 2 * time.Second

// Exit runs when the process exits normally (the core library's
// destructor; never in a fork child). The kernel would close every socket
// and still deliver what was written; here bytes a coalescing stream holds
// in its send buffer live in this process only. So every accelerated
// stream still open is closed (a FIN after its queued bytes, as the
// kernel's close sends), and Exit waits, at most exitDrain in all, until
// every stream closed so far has put its last block into the peer's
// memory, where it survives this process. Connections a fork child may
// still hold are switched to kernel TCP instead. Then the rendezvous
// registrations are withdrawn.
func (p *Process) Exit() {
	// A connection a fork child may still hold goes on there: switched,
	// not ended (forkkeep.go).
	p.settleForks()
	socks := p.switchShared(p.liveSockets())
	p.mu.Lock()
	var streams []dataStream
	for _, s := range socks {
		if st := s.stream.Load(); st != nil {
			streams = append(streams, st)
		}
	}
	streams = append(streams, p.draining...)
	node := p.node
	p.mu.Unlock()
	for _, st := range streams {
		st.Close()
		st.Attend() // the progress goroutines flush held bytes meanwhile
	}
	deadline := time.Now().Add(exitDrain)
	for _, st := range streams {
		for !st.Drained() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if node != nil {
		node.Close()
	}
	if p.stopStats != nil {
		p.stopStats()
	}
	p.bellMu.Lock()
	p.peerCheckOff = true // the idle records' look (bells.go) is not scheduled again
	if p.peerCheck != nil {
		p.peerCheck.Stop()
	}
	p.bellMu.Unlock()
}

// noteDraining keeps a closed stream until it has sent its last block,
// for Exit. Streams found drained are forgotten.
func (p *Process) noteDraining(st dataStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.draining) >= 64 {
		k := 0
		for _, x := range p.draining {
			if !x.Drained() {
				p.draining[k] = x
				k++
			}
		}
		clear(p.draining[k:])
		p.draining = p.draining[:k]
	}
	if !st.Drained() {
		p.draining = append(p.draining, st)
	}
}
