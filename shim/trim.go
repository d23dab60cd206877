package shim

import (
	"sync"
	"time"
)

// trimmer gives back the memory a burst left in a direct connection's
// area. Each direction's sender fills the lowest free block (links,
// preload/c/direct.c), so a connection of small messages keeps its first
// two blocks' pages; a burst (a large response, a bulk transfer) fills
// up to every block, and those pages stayed resident in both processes
// until the area was let go, where a kernel socket's buffer shrinks as
// it drains. Once a second, while the process has direct connections,
// each connection's sending side gives back the pages of its drained
// blocks, once nothing was sent on it since the last pass
// (direct.Conn.Trim): a connection is trimmed one to two seconds after its
// last send, and a busy one never. One timer for the process,
// not one per connection; none while it has no direct connection.
type trimmer struct {
	mu    sync.Mutex
	timer *time.Timer // +checklocks:mu; the next pass, nil: none scheduled
	again bool        // +checklocks:mu; a connection came during a pass: schedule the next one
}

// trimEvery is how often the trimmer looks: a connection's pages go back
// one to two periods after its last send, and a burst that comes back
// within a period finds its pages still there.
const trimEvery = time.Second

// trimKeep is how many blocks at a ring's start keep their pages: none.
// A quiet connection of small messages gives back its two blocks' pages
// too (but the one it shares with the area's header and status bytes):
// after a second without a send, a page fault or two on the next message
// costs nothing that matters, and an idle connection holds what an idle
// kernel socket does, next to nothing.
const trimKeep = 0

// trimSoon schedules a pass, if none is: a direct connection became
// accelerated.
func (p *Process) trimSoon() {
	t := &p.trim
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		t.timer = time.AfterFunc(trimEvery, p.trimPass)
	} else {
		t.again = true // a pass may be running on a list without it
	}
}

// trimPass trims every direct connection of the process and schedules
// the next pass while there is one.
func (p *Process) trimPass() {
	direct := 0
	for _, s := range p.liveSockets() {
		ds := s.direct()
		if ds == nil {
			continue
		}
		direct++
		// A connection that lived through a pass is watched from now
		// on, asleep or not (switchwatch.go): its peer's death is then
		// marked in the area as before, not only at its next sleep.
		ds.conn.WatchNow()
		if ds.conn.Trim(trimKeep) > 0 {
			p.count("direct.trim")
		}
	}
	t := &p.trim
	t.mu.Lock()
	defer t.mu.Unlock()
	if direct > 0 || t.again {
		t.timer = time.AfterFunc(trimEvery, p.trimPass)
	} else {
		t.timer = nil
	}
	t.again = false
}
