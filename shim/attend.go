package shim

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/direct"
)

// Attendance: a thread asleep in the kernel on a stream's behalf keeps the
// stream attended (mux.Stream.Attend): the channel's progress goroutines
// stay awake and ring the socket's wakeup, and held bytes of a packed
// stream keep flowing as during an application call. The interposer gives
// a hook no way to tell a fresh call from the same thread coming back
// after its sleep (it zeroes struct sdpshim_wait each time), so an
// attendance is recorded under the sleeping thread's id and ended by that
// thread's next call on the socket (blocking calls) or its next poll
// (poll, select). A thread that never comes back (EINTR, then it goes
// elsewhere) leaves an attendance that only costs wakeups, until the
// socket closes. gettid is only called when a record exists.

// attendRec is one thread asleep on a socket.
type attendRec struct {
	tid      int
	write    bool
	deadline int64         // monotonic ns (nowNS), 0: none
	timer    *time.Timer   // rings the wake word at the deadline (or backstop)
	dsl      *direct.Sleep // a direct socket's announced sleep, withdrawn at resume
}

// attendance is a socket's records.
type attendance struct {
	n    atomic.Int32
	mu   sync.Mutex
	recs []attendRec // +checklocks:mu
}

// sleepBegin records that the calling thread is about to sleep on s for a
// read or a write, until deadline; the stream is attended meanwhile, and
// when wake >= 0 a timer rings the wake word after it.
func (s *Socket) sleepBegin(write bool, deadline int64, wake time.Duration) {
	a := &s.attend
	r := attendRec{tid: unix.Gettid(), write: write, deadline: deadline}
	if wake >= 0 {
		r.timer = time.AfterFunc(wake, s.wake.ring)
	}
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.n.Add(1)
	a.mu.Unlock()
	s.wake.sleepers.Add(1)
	if st := s.stream.Load(); st != nil {
		st.Attend()
	}
}

// sleepDirect records that the calling thread sleeps on a direct
// socket's area as sl says (block.go, blockDirect).
func (s *Socket) sleepDirect(write bool, deadline int64, sl *direct.Sleep) {
	a := &s.attend
	a.mu.Lock()
	a.recs = append(a.recs, attendRec{tid: unix.Gettid(), write: write, deadline: deadline, dsl: sl})
	a.n.Add(1)
	a.mu.Unlock()
}

// resume ends the calling thread's records on s. For a record of the same
// direction it returns its deadline and true: the call is the thread
// coming back from its sleep.
func (s *Socket) resume(write bool) (deadline int64, back bool) {
	a := &s.attend
	if a.n.Load() == 0 {
		return 0, false
	}
	tid := unix.Gettid()
	a.mu.Lock()
	k := 0
	ended := 0
	for _, r := range a.recs {
		if r.tid != tid {
			a.recs[k] = r
			k++
			continue
		}
		if r.dsl != nil {
			s.withdrawDirect(r.dsl)
		} else {
			ended++
		}
		if r.timer != nil {
			r.timer.Stop()
		}
		if r.write == write {
			deadline, back = r.deadline, true
		}
	}
	a.n.Add(int32(-(len(a.recs) - k)))
	clear(a.recs[k:])
	a.recs = a.recs[:k]
	a.mu.Unlock()
	s.endAttend(ended, true)
	return deadline, back
}

// withdrawDirect withdraws a direct sleep's announcement.
func (s *Socket) withdrawDirect(sl *direct.Sleep) {
	if ds := s.direct(); ds != nil && !ds.freed.Load() {
		ds.conn.Woke(sl)
	}
}

// endAttend undoes n sleepers (futex) or pollers.
func (s *Socket) endAttend(n int, sleepers bool) {
	if n == 0 {
		return
	}
	if sleepers {
		s.wake.sleepers.Add(int32(-n))
	} else {
		s.wake.pollers.Add(int32(-n))
	}
	if st := s.stream.Load(); st != nil {
		for range n {
			st.Unattend()
		}
	}
}

// dropAttendance ends every record (the socket is closing).
func (s *Socket) dropAttendance() {
	a := &s.attend
	a.mu.Lock()
	n := 0
	for _, r := range a.recs {
		if r.timer != nil {
			r.timer.Stop()
		}
		if r.dsl != nil {
			s.withdrawDirect(r.dsl)
		} else {
			n++
		}
	}
	a.recs = nil
	a.n.Store(0)
	a.mu.Unlock()
	s.endAttend(n, true)
}

// pollAttendance records, per thread, the sockets a poll or select of that
// thread attends while it sleeps; the thread's next poll ends them. A
// socket without its stream yet (connecting) is watched only: its events
// kick the thread (polls) but no stream is attended.
type pollAttendance struct {
	mu  sync.Mutex
	by  map[int][]pollRec // +checklocks:mu
	any atomic.Int32
}

type pollRec struct {
	s        *Socket
	attended bool // counted in pollers, its stream attended
}

// begin attends socks for the calling thread, and watches watch.
func (pa *pollAttendance) begin(tid int, socks, watch []*Socket) {
	recs := make([]pollRec, 0, len(socks)+len(watch))
	for _, s := range socks {
		s.wake.polls.Add(1)
		s.wake.pollers.Add(1)
		if st := s.stream.Load(); st != nil {
			st.Attend()
		}
		recs = append(recs, pollRec{s: s, attended: true})
	}
	for _, s := range watch {
		s.wake.polls.Add(1)
		recs = append(recs, pollRec{s: s})
	}
	pa.mu.Lock()
	if pa.by == nil {
		pa.by = map[int][]pollRec{}
	}
	pa.by[tid] = append(pa.by[tid], recs...)
	pa.any.Store(int32(len(pa.by)))
	pa.mu.Unlock()
}

// end ends the calling thread's attendances.
func (pa *pollAttendance) end(tid int) {
	if pa.any.Load() == 0 {
		return
	}
	pa.mu.Lock()
	recs := pa.by[tid]
	delete(pa.by, tid)
	pa.any.Store(int32(len(pa.by)))
	pa.mu.Unlock()
	for _, r := range recs {
		r.s.wake.polls.Add(-1)
		if r.attended {
			r.s.endAttend(1, false)
		}
	}
}

// forget ends every poll attendance of s (closing).
func (pa *pollAttendance) forget(s *Socket) {
	if pa.any.Load() == 0 {
		return
	}
	n, polls := 0, 0
	pa.mu.Lock()
	for tid, recs := range pa.by {
		k := 0
		for _, r := range recs {
			if r.s == s {
				polls++
				if r.attended {
					n++
				}
				continue
			}
			recs[k] = r
			k++
		}
		if k == 0 {
			delete(pa.by, tid)
		} else {
			pa.by[tid] = recs[:k]
		}
	}
	pa.any.Store(int32(len(pa.by)))
	pa.mu.Unlock()
	s.wake.polls.Add(int32(-polls))
	s.endAttend(n, false)
}
