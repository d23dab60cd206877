package shim

import "sync/atomic"

// fdTable mirrors the interposer's table for the fds the shim tracks: fd
// number -> *Socket (or *epollSet for an emulated epoll fd). Like the C
// table it is levels of fixed arrays, the lower ones allocated on first
// use and never freed, so a lookup on the data path is three atomic
// loads, no lock and no map. Several fds (dup) may name one object.
//
// Three levels, not two: a directory for every fd number in two levels
// was a 4 MiB array of pointers in every process, which the runtime
// zeroed at start-up and then scanned at every collection (the first
// one during start-up: about a third of the core's start).
type fdTable struct {
	top [fdTopSize]atomic.Pointer[fdMid]
}

const (
	fdChunkShift = 12
	fdChunkSize  = 1 << fdChunkShift
	fdMidShift   = 12
	fdMidSize    = 1 << fdMidShift
	fdTopSize    = 1 << (31 - fdChunkShift - fdMidShift)
)

type (
	fdMid   [fdMidSize]atomic.Pointer[fdChunk]
	fdChunk [fdChunkSize]atomic.Pointer[fdEntry]
)

// fdEntry is what one fd names: a socket or an epoll set.
type fdEntry struct {
	sock *Socket
	ep   *epollSet
}

func (t *fdTable) chunk(fd int, create bool) *fdChunk {
	if fd < 0 {
		return nil
	}
	i := uint(fd) >> (fdChunkShift + fdMidShift)
	if i >= fdTopSize {
		return nil
	}
	m := t.top[i].Load()
	if m == nil {
		if !create {
			return nil
		}
		t.top[i].CompareAndSwap(nil, new(fdMid))
		m = t.top[i].Load()
	}
	slot := &m[(uint(fd)>>fdChunkShift)&(fdMidSize-1)]
	c := slot.Load()
	if c == nil && create {
		slot.CompareAndSwap(nil, new(fdChunk))
		c = slot.Load()
	}
	return c
}

func (t *fdTable) get(fd int) *fdEntry {
	c := t.chunk(fd, false)
	if c == nil {
		return nil
	}
	return c[uint(fd)&(fdChunkSize-1)].Load()
}

// socket returns the socket fd names, or nil.
func (t *fdTable) socket(fd int) *Socket {
	if e := t.get(fd); e != nil {
		return e.sock
	}
	return nil
}

// epoll returns the epoll set fd names, or nil.
func (t *fdTable) epoll(fd int) *epollSet {
	if e := t.get(fd); e != nil {
		return e.ep
	}
	return nil
}

// set makes fd name e (nil: nothing).
func (t *fdTable) set(fd int, e *fdEntry) {
	if c := t.chunk(fd, e != nil); c != nil {
		c[uint(fd)&(fdChunkSize-1)].Store(e)
	}
}

// take removes and returns what fd named.
func (t *fdTable) take(fd int) *fdEntry {
	c := t.chunk(fd, false)
	if c == nil {
		return nil
	}
	return c[uint(fd)&(fdChunkSize-1)].Swap(nil)
}

// setIfEmpty makes fd name e if it names nothing; it reports whether it
// did.
func (t *fdTable) setIfEmpty(fd int, e *fdEntry) bool {
	c := t.chunk(fd, true)
	return c != nil && c[uint(fd)&(fdChunkSize-1)].CompareAndSwap(nil, e)
}

// lookup returns the socket fd names for a hook. An fd the shim does not
// know that the interposer has as CANDIDATE is adopted (deferred_accept.go:
// an fd inherited by a fork child running a fresh core, received, or
// closed behind the interposer's back and its number reused by a socket);
// one it has as MANAGED, or that cannot be adopted, is set UNMANAGED, so
// its later calls go straight to libc; the hook then returns Pass.
func (p *Process) lookup(fd int) *Socket {
	e := p.fds.get(fd)
	if e != nil && e.sock != nil {
		return e.sock
	}
	if e == nil {
		switch p.host.FDState(fd) {
		case FDCandidate:
			return p.adopt(fd)
		case FDManaged:
			p.host.SetFDState(fd, FDUnmanaged)
		}
	}
	return nil
}

// socketInUse is lookup for a call that uses the connection before the
// data path sees it (epoll_ctl): an adopted socket is resolved first
// (deferred_accept.go), and nil is returned when it became plain.
func (p *Process) socketInUse(fd int) *Socket {
	s := p.lookup(fd)
	if s != nil && s.getState() == sockAdopted {
		s.resolve()
	}
	if s != nil && s.getState() == sockFallback {
		return nil
	}
	return s
}
