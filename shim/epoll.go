package shim

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/mux"
)

// epoll over accelerated sockets with the kernel's semantics. An epoll fd
// that holds an accelerated (or connecting) socket is MANAGED: its
// interest list entries for such sockets live here, while the kernel's
// epoll holds, under a token of ours, what to wake on: a direct socket
// itself, for its peer's rings (registered edge-triggered, so every ring
// wakes every set holding the socket and no set's wait consumes
// another's), the set's kick eventfd (its bell, and what this process's
// events write), or the descriptors a connecting socket waits for. Kernel fds in the same
// set stay in the kernel's list, untouched. A socket in an emulated set
// stays attended (its progress goroutines awake) while it is there.
//
// Modes, as fs/eventpoll.c and tcp_poll give them:
//   - level-triggered: reported while ready;
//   - EPOLLET: reported when something new happened since the entry's
//     last evaluation: bytes arrived (EPOLLIN), a condition bit appeared
//     (RDHUP, HUP, ERR, OUT after not-OUT), or the socket was out of send
//     space and has room again (the kernel's SOCK_NOSPACE wakeup); what is
//     reported is the whole ready mask, as the kernel's re-poll gives;
//   - EPOLLONESHOT: disabled after one report until EPOLL_CTL_MOD, which
//     re-evaluates the entry at once (ready now: reported);
//   - EPOLLEXCLUSIVE: accepted on ADD with the kernel's checks; with one
//     waiter per set it is level-triggered.
// An emulated set added to another epoll set (or polled) must look
// readable to the kernel while it has something to report: such a set
// gets a "self" eventfd in its kernel list, kept signalled exactly while
// a level-triggered entry is ready.

// epollSet is one emulated epoll instance.
type epollSet struct {
	p  *Process
	fd int // the epoll fd the kernel registrations were made on

	mu      sync.Mutex
	entries map[int]*epollEntry // +checklocks:mu; by the socket's fd
	// list holds the entries of entries (live and dormant), for scans:
	// a slice iterates in a fraction of a map's time; rot rotates where
	// collect starts, so that a short ev cannot starve the last ones.
	list    []*epollEntry // +checklocks:mu
	rot     int           // +checklocks:mu
	dormant int           // dormant entries in entries; +checklocks:mu
	tokens  map[uint64]*epollEntry
	// retiredQ holds the tokens of removed entries, oldest first: a
	// kernel registration under such a token can outlive the entry (an
	// event already returned by the kernel's wait, a rendezvous fd closed
	// later), and its events must never reach the program as its data.
	// Bounded by maxRetired.
	retiredQ []uint64 // +checklocks:mu
	// ours holds every token of the set's (tokens, retiredQ and the
	// kick's), ascending: tokens are drawn increasing, so a new one is
	// appended, and only a retired one leaves (oursDropLocked). A publish
	// copies it as the snapshot's tokens; oursLocked searches it.
	ours []uint64 // +checklocks:mu
	fds  int      // fds naming the set (dup); +checklocks:mu

	// progressLocked's scratch, the channels it moved and whether it
	// flushed them: the first maxMarks in marks (searched in order: a set
	// holds the streams of few peer processes), the rest in chans.
	marks []chanMark            // +checklocks:mu
	chans map[*mux.Channel]bool // +checklocks:mu
	// The only channel progressLocked moved, when one did (most sets:
	// one peer process), so that pumpedLocked needs no map access.
	onlyChan    *mux.Channel // +checklocks:mu
	onlyFlushed bool         // +checklocks:mu

	// Arming (wake.go, wakeup.ringWanted): armed counts the threads
	// between their last readiness check before a kernel sleep on the set
	// and their return; kicked says an event wrote the set's kick
	// since the (only) armed thread armed or woke, so that further events
	// need not (it will scan every entry when it wakes); watched is set
	// for good once the kernel may watch the set with nobody in EpollWait
	// (nested in another epoll set, polled): every event writes then.
	armed   atomic.Int32
	kicked  atomic.Bool
	watched atomic.Bool

	selfFD    int    // nested: the self eventfd, -1 until needed; +checklocks:mu
	selfToken uint64 // its token in the kernel list
	selfOn    bool   // +checklocks:mu; the self eventfd is signalled

	// The interposer's snapshot (epoll_fast.go): pub, one is installed;
	// pubDirty, the set changed since; kickFD, the eventfd that wakes an
	// interposer thread asleep on a stale one (-1 until published);
	// fdGone, the number the snapshot is keyed by was closed while a dup
	// of it stays (never published again).
	pub       atomic.Bool
	pubDirty  atomic.Bool
	pubBarred atomic.Bool // not publishable until the set changes
	// pubSeen: a snapshot was installed once. The interposer's waits
	// take the rings of the sockets and bells, which spend the arms the
	// core's scans made, without the core seeing them: from then on the
	// core trusts no entry's rest (quiet, collectAt) and evaluates and
	// arms every entry at each of its scans.
	pubSeen   atomic.Bool
	kickFD    int          // +checklocks:mu; written under kickMu, read under either
	kickMu    sync.RWMutex // kick holds it (read) while writing kickFD, so that the set's end cannot close it meanwhile
	kickToken uint64       // its token in the kernel list
	bell      int          // kickFD's number among the process's bells (bells.go), 0: none
	fdGone    bool         // +checklocks:mu
}

// epollEntry is one accelerated socket in a set.
type epollEntry struct {
	fd       int
	sock     *Socket
	events   uint32
	data     uint64
	token    uint64
	lastMask int16  // EPOLLET: the ready mask at the last evaluation
	lastArr  uint64 // EPOLLET: bytes arrived at the last evaluation
	nospace  uint32 // EPOLLET: the socket's out-of-space count last seen writable
	disabled bool   // EPOLLONESHOT fired
	attended bool   // the stream is attended (accelerated)
	sockReg  bool   // a direct socket's fd is registered for its peer's rings
	tcpReg   bool   // the socket's own fd is registered (connect pending)
	answerFD int    // the rendezvous connection registered (verdict pending)
	dormant  bool   // deleted by the program, registrations kept (dormantKey)
	idx      int    // position in set.list
	// quiet: the entry's last committed evaluation (collectAt) reported
	// nothing, and quietGen is the socket's wake word read before it
	// (quietSkip).
	quiet    bool
	quietGen uint32
}

// wantsOut reports whether e asks for a writable event (its stream's
// channel is then flushed by a scan's progressLocked).
func (e *epollEntry) wantsOut() bool {
	return e.events&(unix.EPOLLOUT|pollWRNORM|pollWRBAND) != 0
}

// dormantKey is where set.entries keeps the dormant entry of fd: an
// accelerated socket's entry that EPOLL_CTL_DEL removed from the
// program's view keeps its kernel registration, its token and its
// attendance, so that the ADD that follows (event loops such as ae
// delete and re-add a socket around every request) costs no system call
// and no attendance change. The key never names an fd, so lookups by fd
// miss it; scans skip it; removals (close, fallback, the set's end)
// drop it with the live entries.
func dormantKey(fd int) int { return -(fd + 1) }

const (
	epollET        = unix.EPOLLET
	epollOneShot   = unix.EPOLLONESHOT
	epollExclusive = 1 << 28
	// The bits EPOLLEXCLUSIVE may come with (fs/eventpoll.c).
	epollExclusiveOK = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLERR | unix.EPOLLHUP | 1<<29 | epollET | epollExclusive
)

// emulatedInEpoll reports whether the socket's epoll entries are the
// shim's: accelerated or connecting. One read of the state: two reads
// could straddle the socket's acceleration by another thread (connecting,
// then accelerated) and find it neither, and the entry went into the
// kernel's set, which never reports the stream's data.
func (s *Socket) emulatedInEpoll() bool {
	st := s.getState()
	return st == sockAccelerated || st == sockConnecting
}

// EpollCtl is the epoll_ctl hook. It emulates entries for accelerated and
// connecting sockets and passes everything else to the kernel.
func (p *Process) EpollCtl(epfd, op, fd int, events uint32, data uint64) int64 {
	s := p.socketInUse(fd) // adopts and resolves a deferred acceptance (fdtable.go)
	set := p.fds.epoll(epfd)
	if inner := p.fds.epoll(fd); inner != nil && op == unix.EPOLL_CTL_ADD && fd != epfd {
		inner.nest()
	}
	if s == nil || !s.emulatedInEpoll() {
		if set != nil && op != unix.EPOLL_CTL_ADD {
			set.mu.Lock()
			_, ours := set.entries[fd]
			set.mu.Unlock()
			if ours {
				return set.ctl(op, fd, nil, events, data)
			}
		}
		return Pass
	}
	if set == nil {
		if op != unix.EPOLL_CTL_ADD {
			return negErrno(unix.ENOENT)
		}
		// Validate epfd as the kernel would, before taking it over.
		if fd == epfd {
			return negErrno(unix.EINVAL)
		}
		if e := checkEpollFD(epfd); e != 0 {
			return negErrno(e)
		}
		set = &epollSet{p: p, fd: epfd, entries: map[int]*epollEntry{}, tokens: map[uint64]*epollEntry{}, fds: 1, selfFD: -1, kickFD: -1}
		if inKernelSet(epfd) {
			// Added to another epoll set while it was the kernel's: the
			// kernel watches it with nobody in EpollWait.
			set.watched.Store(true)
		}
		p.fds.set(epfd, &fdEntry{ep: set})
		p.host.SetFDState(epfd, FDManaged)
		p.mu.Lock()
		p.epolls[set] = struct{}{}
		p.mu.Unlock()
	}
	return set.ctl(op, fd, s, events, data)
}

func (set *epollSet) ctl(op, fd int, s *Socket, events uint32, data uint64) int64 {
	if op == unix.EPOLL_CTL_MOD && set.modInPlace(fd, events, data) {
		return 0
	}
	if op == unix.EPOLL_CTL_ADD && set.addInPlace(fd, s, events, data) {
		return 0
	}
	set.stale() // before the change: the interposer's waits hand over
	set.mu.Lock()
	defer set.mu.Unlock()
	defer set.syncSelfLocked()
	defer set.changedLocked(op != unix.EPOLL_CTL_DEL)
	if op == unix.EPOLL_CTL_ADD {
		// The set's bell exists before the socket's rendezvous (a
		// listener's accepts, a connect): peers learn bells only there.
		set.kickLocked()
	}
	e := set.entries[fd]
	if op != unix.EPOLL_CTL_DEL && events&epollExclusive != 0 {
		if op == unix.EPOLL_CTL_MOD || events&^epollExclusiveOK != 0 {
			return negErrno(unix.EINVAL)
		}
	}
	switch op {
	case unix.EPOLL_CTL_ADD:
		if e != nil && e.sock != s {
			// The entry of a socket this number named before (closed
			// while a copy stays open): the kernel keeps both; here the
			// new one replaces it.
			set.removeLocked(e)
			e.sock.mu.Lock()
			delete(e.sock.epolls, set)
			e.sock.gateLocked()
			e.sock.mu.Unlock()
			e = nil
		}
		if e != nil {
			return negErrno(unix.EEXIST)
		}
		if d := set.entries[dormantKey(fd)]; d != nil {
			if d.sock == s && d.attended && s.stream.Load() != nil {
				delete(set.entries, dormantKey(fd))
				d.dormant = false
				set.dormant--
				d.events, d.data, d.disabled, d.lastMask, d.lastArr, d.nospace = events, data, false, 0, 0, 0
				d.quiet = false
				set.entries[fd] = d
				return 0
			}
			set.dropLocked(d)
		}
		if set.dormant > 0 {
			// The socket's entry under another number (a dup) holds its
			// registration: it goes, the new one registers.
			for _, d := range set.list {
				if d.dormant && d.sock == s {
					set.dropLocked(d)
					break
				}
			}
		}
		set.newEntryLocked(fd, s, events, data)
		return 0
	case unix.EPOLL_CTL_MOD:
		if e == nil {
			return negErrno(unix.ENOENT)
		}
		if e.events&epollExclusive != 0 {
			return negErrno(unix.EINVAL)
		}
		e.events, e.data, e.disabled, e.lastMask, e.lastArr = events, data, false, 0, 0
		e.quiet = false
		return 0
	case unix.EPOLL_CTL_DEL:
		if e == nil {
			return negErrno(unix.ENOENT)
		}
		if e.attended && !e.tcpReg && e.answerFD < 0 && s != nil && e.sock == s {
			delete(set.entries, fd)
			if d := set.entries[dormantKey(fd)]; d != nil {
				set.dropLocked(d)
			}
			e.dormant, e.disabled = true, true // scans skip it as a disabled one
			set.dormant++
			set.entries[dormantKey(fd)] = e
			return 0
		}
		set.removeLocked(e)
		e.sock.mu.Lock()
		delete(e.sock.epolls, set)
		e.sock.gateLocked()
		e.sock.mu.Unlock()
		return 0
	}
	return negErrno(unix.EINVAL)
}

// newEntryLocked adds a fresh entry for s under fd and registers what
// it waits for.
//
// +checklocks:set.mu
func (set *epollSet) newEntryLocked(fd int, s *Socket, events uint32, data uint64) *epollEntry {
	e := &epollEntry{fd: fd, sock: s, events: events, data: data, token: newEpollToken(), answerFD: -1}
	set.entries[fd] = e
	set.tokens[e.token] = e
	set.oursAddLocked(e.token)
	e.idx = len(set.list)
	set.list = append(set.list, e)
	s.mu.Lock()
	if s.epolls == nil {
		s.epolls = map[*epollSet]struct{}{}
	}
	s.epolls[set] = struct{}{}
	s.gateLocked()
	s.mu.Unlock()
	set.armLocked(e)
	return e
}

// epollTokens is the last token drawn for the core's registrations in
// the kernel's sets (0: none yet). newEpollToken draws them increasing,
// from a random start (a program's own epoll_data is as unlikely to equal
// one as a random token), so that an entry added later has the largest
// token and goes at the end of a published snapshot's sorted tokens
// (addInPlace). The start is drawn at the first use, not when the
// package initialises: reading the random source then started the
// runtime's poller before protectRuntime looked for its descriptors.
var epollTokens atomic.Uint64

func newEpollToken() uint64 {
	if epollTokens.Load() == 0 {
		epollTokens.CompareAndSwap(0, newToken()&(1<<62-1)|1<<62) // odd (newToken), below 1<<63: it never wraps
	}
	return epollTokens.Add(2)
}

// armLocked makes the kernel epoll wake for e. The set's kick eventfd
// always (every event of this process writes it, wake.go); a direct
// socket's fd itself for its peer's rings once it is accelerated; while
// it connects, its TCP fd until the kernel connect completes, then the
// rendezvous connection until the verdict (that one is never removed
// explicitly: it is closed after the verdict, which removes it, and its
// number may be reused by then).
//
// +checklocks:set.mu
func (set *epollSet) armLocked(e *epollEntry) {
	s := e.sock
	set.kickLocked()
	if st := s.stream.Load(); st != nil {
		// The rendezvous connection was closed before the stream was
		// set (settle.go), which took it out of the kernel's set.
		e.answerFD = -1
		if _, direct := st.(*directStream); direct && !e.sockReg {
			ev := unix.EpollEvent{Events: ringEvents}
			setEpollData(&ev, e.token)
			op := unix.EPOLL_CTL_ADD
			if e.tcpReg {
				op = unix.EPOLL_CTL_MOD
			}
			if unix.EpollCtl(set.fd, op, e.fd, &ev) == nil {
				e.sockReg, e.tcpReg = true, false
			}
		} else if !direct && e.tcpReg {
			unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
			e.tcpReg = false
		}
		if ds, direct := st.(*directStream); direct && set.watched.Load() && !e.disabled {
			// The kernel watches the set (nested in another, polled)
			// with nobody scanning it: the peer must ring for any
			// change, so the entry stays armed (each scan arms again).
			s.armDirect(ds, e.fd, int16(e.events&0xffff), set.bell)
		}
		if !e.attended {
			e.attended = true
			s.wake.pollers.Add(1)
			st.Attend()
		}
		return
	}
	// What the connection waits for (asked without POLLOUT, which a
	// connected socket awaiting the verdict reports without waiting).
	// The offer of a nonblocking connect kicks the set at its end, and so
	// does a settle by another thread (which may read and close the
	// rendezvous connection registered below). A posted offer's verdict
	// rings the set's bell (post.go).
	s.armPost(set.bell)
	_, fd, ev := s.pollEvents(e.fd, unix.POLLIN)
	switch {
	case fd < 0:
	case fd == e.fd:
		if !e.tcpReg && set.add(fd, uint32(ev), e.token) == nil {
			e.tcpReg = true
		}
	case fd != e.answerFD:
		if e.tcpReg {
			unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
			e.tcpReg = false
		}
		if set.add(fd, uint32(ev), e.token) == nil {
			e.answerFD = fd
		}
	}
}

// ringEvents is what a direct socket's registration waits for: a ring
// (a byte), the peer's end, the urgent byte of a switch request.
// Edge-triggered: the rings are read only now and then
// (direct.Conn.DrainDue).
const ringEvents = unix.EPOLLIN | unix.EPOLLPRI | unix.EPOLLRDHUP | unix.EPOLLET

// kickLocked makes the set's kick eventfd, registered in its kernel list
// under kickToken, once.
//
// +checklocks:set.mu
func (set *epollSet) kickLocked() {
	if set.kickFD >= 0 {
		return
	}
	fd, bell := set.p.bells.takeSpare() // given in the last rendezvous (bells.go)
	if bell == 0 {
		var err error
		if fd, err = set.p.newDirectEventFD(); err != nil {
			return
		}
	}
	set.kickToken = newEpollToken()
	if set.add(fd, unix.EPOLLIN|unix.EPOLLET, set.kickToken) != nil {
		if bell != 0 {
			set.p.bells.retire(bell)
		}
		set.p.closeFD(fd)
		return
	}
	set.oursAddLocked(set.kickToken)
	set.kickMu.Lock()
	set.kickFD = fd
	set.kickMu.Unlock()
	if bell == 0 {
		bell = set.p.bells.add(fd)
	}
	set.bell = bell // the set's sleepers' bell
}

// kick wakes a thread asleep on the set (it scans every entry). Any
// thread, any lock held: it only writes the eventfd.
func (set *epollSet) kick() {
	set.kickMu.RLock()
	if fd := set.kickFD; fd >= 0 {
		eventfdAdd(fd)
	}
	set.kickMu.RUnlock()
}

// add registers fd in the kernel epoll under token.
func (set *epollSet) add(fd int, events uint32, token uint64) error {
	ev := unix.EpollEvent{Events: events}
	setEpollData(&ev, token)
	return unix.EpollCtl(set.fd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// removeLocked drops e from the set.
//
// +checklocks:set.mu
func (set *epollSet) removeLocked(e *epollEntry) {
	if e.tcpReg || e.sockReg {
		unix.EpollCtl(set.fd, unix.EPOLL_CTL_DEL, e.fd, nil)
		e.tcpReg, e.sockReg = false, false
	}
	if e.attended {
		e.attended = false
		e.sock.endAttend(1, false)
	}
	if e.dormant {
		delete(set.entries, dormantKey(e.fd))
		set.dormant--
	} else {
		delete(set.entries, e.fd)
	}
	last := set.list[len(set.list)-1]
	set.list[e.idx], last.idx = last, e.idx
	set.list[len(set.list)-1] = nil
	set.list = set.list[:len(set.list)-1]
	delete(set.tokens, e.token)
	set.retireLocked(e.token)
}

// dropLocked removes a dormant entry for good.
//
// +checklocks:set.mu
func (set *epollSet) dropLocked(d *epollEntry) {
	set.removeLocked(d)
	d.sock.mu.Lock()
	if !set.holdsLocked(d.sock) {
		delete(d.sock.epolls, set)
		d.sock.gateLocked()
	}
	d.sock.mu.Unlock()
}

// holdsLocked reports whether an entry (live or dormant) of the set is
// for s.
//
// +checklocks:set.mu
func (set *epollSet) holdsLocked(s *Socket) bool {
	for _, e := range set.entries {
		if e.sock == s {
			return true
		}
	}
	return false
}

// maxRetired bounds the retired tokens a set remembers.
const maxRetired = 1 << 16

// retireLocked remembers token as ours after its entry is gone.
//
// +checklocks:set.mu
func (set *epollSet) retireLocked(token uint64) {
	if len(set.retiredQ) >= maxRetired {
		set.oursDropLocked(set.retiredQ[0])
		set.retiredQ = set.retiredQ[1:]
	}
	set.retiredQ = append(set.retiredQ, token) // it stays in ours
}

// oursAddLocked adds t, just drawn, to ours.
//
// +checklocks:set.mu
func (set *epollSet) oursAddLocked(t uint64) {
	if n := len(set.ours); n == 0 || set.ours[n-1] < t {
		set.ours = append(set.ours, t)
		return
	}
	if i, found := slices.BinarySearch(set.ours, t); !found {
		set.ours = slices.Insert(set.ours, i, t)
	}
}

// oursDropLocked removes t from ours, moving the shorter side: the
// oldest retired token is usually among the smallest.
//
// +checklocks:set.mu
func (set *epollSet) oursDropLocked(t uint64) {
	i, found := slices.BinarySearch(set.ours, t)
	if !found {
		return
	}
	if i < len(set.ours)/2 {
		copy(set.ours[1:i+1], set.ours[:i])
		set.ours = set.ours[1:]
		return
	}
	set.ours = slices.Delete(set.ours, i, i+1)
}

// oursLocked reports whether t is a token of the shim's (live or
// retired) rather than the program's data.
//
// +checklocks:set.mu
func (set *epollSet) oursLocked(t uint64) bool {
	if _, ok := set.tokens[t]; ok {
		return true
	}
	if _, ok := slices.BinarySearch(set.ours, t); ok {
		return true // retired, or the kick's
	}
	return set.selfFD >= 0 && t == set.selfToken
}

// toKernelLocked hands the entry of a socket that fell back to kernel TCP
// to the kernel's interest list, as the program asked for it.
//
// +checklocks:set.mu
func (set *epollSet) toKernelLocked(e *epollEntry) {
	set.stale()
	set.removeLocked(e)
	ev := unix.EpollEvent{Events: e.events}
	setEpollData(&ev, e.data)
	unix.EpollCtl(set.fd, unix.EPOLL_CTL_ADD, e.fd, &ev)
}

// handOver gives the entries of s, which fell back to kernel TCP, to the
// kernel's interest list.
func (set *epollSet) handOver(s *Socket) {
	set.stale()
	set.mu.Lock()
	for _, e := range set.entries {
		switch {
		case e.sock == s && e.dormant:
			set.removeLocked(e)
		case e.sock == s:
			set.toKernelLocked(e)
		}
	}
	set.syncSelfLocked()
	set.mu.Unlock()
	s.mu.Lock()
	delete(s.epolls, set)
	s.gateLocked()
	s.mu.Unlock()
}

// changedLocked follows a change of the set's entries: the snapshot is
// marked stale again, under the set's lock, and a change that may have
// made something ready (grew: an ADD or a MOD) kicks a thread the core
// armed for a kernel sleep. A wait that the mark before the change handed
// to the core could publish the set again before the change, spending that
// mark and leaving a fresh snapshot without the change; and a thread asleep
// through the core is no sleeper of the snapshot's for a mark to kick,
// while nothing armed a socket added meanwhile: such a socket went unseen
// until some other event woke the thread (sem_add: a socket added, or
// deleted and added back with a request waiting, while the server's thread
// slept got no answer). A thread that the core answered after a wait the
// interposer handed over sleeps as the interposer's again
// (preload/c/epoll.c), counted there. The kick costs nothing where the
// program changes its set between its own waits (armed is 0 then): a kick
// at every change cost redis-benchmark -c 1 half its rate, its next wait
// returning early for it.
//
// +checklocks:set.mu
func (set *epollSet) changedLocked(grew bool) {
	set.stale()
	if grew && set.armed.Load() > 0 {
		set.kick()
	}
}

// forgetSocket drops the entries of a socket whose last fd is closing.
func (set *epollSet) forgetSocket(s *Socket) {
	set.stale()
	set.mu.Lock()
	for _, e := range set.entries {
		if e.sock == s {
			set.removeLocked(e)
		}
	}
	set.syncSelfLocked()
	set.changedLocked(false)
	set.mu.Unlock()
}

// EpollWait is the epoll_wait hook. nkernel < 0: before sleeping, report
// what is ready now (> 0) or 0 to let the interposer sleep in the kernel;
// -1 lets it poll for the wait policy's budget first (kernel fds of the
// set included), for at most timeout (the program's time left; < 0: no
// bound), -2 (a zero timeout) does not. nkernel >= 0: the kernel
// returned ev[:nkernel]; drop our tokens' events, add the ready sockets,
// return the count (0: sleep again). epollDisarm: the interposer leaves
// without events after a 0 (an error, EINTR, the timeout).
//
// A 0 answer to nkernel < 0 arms the set (arm) and every answer > 0 to a
// later call disarms it, as does epollDisarm: the set's events write its
// eventfds only while some thread is armed (wakeup.ringWanted).
func (p *Process) EpollWait(epfd int, ev []unix.EpollEvent, nkernel int, timeout time.Duration) int64 {
	set := p.fds.epoll(epfd)
	if set == nil {
		return Pass
	}
	defer set.publish() // the interposer may answer the next waits (epoll_fast.go)
	if nkernel == epollDisarm {
		set.disarm()
		return 0
	}
	if nkernel >= 0 {
		// Woken (or the kernel had events): kicked is cleared before the
		// scan, so an event the scan misses writes again.
		set.kicked.Store(false)
		n := set.filter(ev, nkernel)
		n += set.collect(ev[n:])
		if n > 0 {
			set.disarm()
		}
		return int64(n)
	}
	n := set.collect(ev)
	if n > 0 && n < len(ev) {
		// Sockets are ready: the kernel fds that are ready go with them.
		n += set.kernelReady(ev[n:])
	}
	if n > 0 {
		return int64(n)
	}
	if nkernel == -1 {
		polls := 0
		check := func() bool {
			// The kernel list (the program's kernel fds) every
			// kernelEvery polls: it costs a system call, the sockets'
			// scan does not, and a kernel fd ready meanwhile is found
			// within a few microseconds (or at once by the kernel sleep).
			n = 0
			if polls%kernelEvery == 0 {
				n = set.kernelReady(ev)
			}
			polls++
			n += set.collectAt(ev[n:], false)
			return n > 0
		}
		p.pollWaiter().Wait(check, kernelBell{}, pollDeadline(timeout))
		if n > 0 {
			return int64(n)
		}
	}
	if nkernel != -1 {
		// A zero timeout: the interposer's kernel wait does not sleep,
		// and its answer is scanned (nkernel >= 0); armed only for the
		// protocol's sake.
		set.kicked.Store(false)
		set.armed.Add(1)
		return 0
	}
	return int64(set.arm(ev))
}

// kernelEvery is how often (in polls) the budget poll of EpollWait
// looks at the kernel list.
const kernelEvery = 8

// epollDisarm is EpollWait's nkernel for an interposer leaving its wait
// without events after the set was armed.
const epollDisarm = -3

// arm readies the set for a kernel sleep of the calling thread: armed up,
// kicked cleared, then a last scan of the sockets (not of the kernel
// list: a kernel event taken here could be the write of an event the
// scan misses). Events found (> 0) disarm at once; 0: the thread sleeps
// armed.
func (set *epollSet) arm(ev []unix.EpollEvent) int {
	set.kicked.Store(false)
	set.armed.Add(1)
	n := set.collect(ev)
	if n > 0 {
		set.disarm()
	}
	return n
}

// disarm undoes one arm (never below zero: a stray epollDisarm).
func (set *epollSet) disarm() {
	for {
		a := set.armed.Load()
		if a <= 0 || set.armed.CompareAndSwap(a, a-1) {
			return
		}
	}
}

// ringWanted reports whether an event of a socket of the set (its only
// set) must write the set's kick: the set is watched, several
// threads are armed, or one is and no event wrote since it armed or woke
// (a sleeping thread scans every entry when it wakes, so one write per
// sleep is enough).
func (set *epollSet) ringWanted() bool {
	if set.watched.Load() || set.pub.Load() {
		return true // the kernel or the interposer watches with nobody armed here
	}
	switch a := set.armed.Load(); {
	case a <= 0:
		return false
	case a > 1:
		return true
	}
	return set.kicked.CompareAndSwap(false, true)
}

// kernelReady takes what the set's kernel list has ready now into ev,
// without our tokens.
func (set *epollSet) kernelReady(ev []unix.EpollEvent) int {
	k, err := unix.EpollWait(set.fd, ev, 0)
	if err != nil || k <= 0 {
		return 0
	}
	return set.filter(ev, k)
}

// gateLocked points the socket's wakeup at its only emulated epoll set,
// or at none when it is in several or none (wakeup.ringWanted).
//
// +checklocks:s.mu
func (s *Socket) gateLocked() {
	var only *epollSet
	if len(s.epolls) == 1 {
		for set := range s.epolls {
			only = set
		}
	}
	s.wake.gate.Store(only)
	sets := make([]*epollSet, 0, len(s.epolls))
	for set := range s.epolls {
		sets = append(sets, set)
	}
	s.wake.sets.Store(&sets)
}

// filter drops our tokens' events from the kernel's ev[:k] and returns
// how many are left (at the front).
func (set *epollSet) filter(ev []unix.EpollEvent, k int) int {
	n := 0
	set.mu.Lock()
	for _, x := range ev[:k] {
		t := epollData(&x)
		if !set.oursLocked(t) {
			ev[n] = x
			n++
		} else if e := set.tokens[t]; e != nil && e.sock.direct() != nil {
			// A direct socket's peer rang it: that spent the arm its last
			// exact scan made (quiet, collectAt), whatever rang it. The
			// next scan evaluates the entry and arms it again. (Other
			// sockets' rings come from the set's own arming, wake.go.)
			e.quiet = false
		}
	}
	set.mu.Unlock()
	return n
}

// collect writes the ready entries' events into ev and returns how many.
func (set *epollSet) collect(ev []unix.EpollEvent) int { return set.collectAt(ev, true) }

// collectAt is collect; exact false (a poll of the budget loop, which a
// collect follows before any sleep) moves the channels without waiting
// for a pump in progress (mux.Channel.ProgressPoll).
func (set *epollSet) collectAt(ev []unix.EpollEvent, exact bool) int {
	set.mu.Lock()
	defer set.mu.Unlock()
	defer set.syncSelfLocked()
	set.progressLocked(exact)
	n := 0
	var fellBack []*epollEntry
	size := len(set.list)
	start := 0
	if size > 0 {
		start = set.rot % size // the list may have shrunk since
	}
	for i := 0; i < size && n < len(ev); i++ {
		j := start + i // (start+i) mod size, without a division per entry
		if j >= size {
			j -= size
		}
		e := set.list[j]
		if e.disabled {
			continue
		}
		s := e.sock
		if s.getState() == sockFallback {
			fellBack = append(fellBack, e) // removing it now would move the list under the scan
			continue
		}
		set.armLocked(e)
		gen, quietable := set.quietSkip(e)
		quietable = quietable && !set.pubSeen.Load()
		if quietable && e.quiet && gen == e.quietGen && set.armHeldLocked(e) {
			continue // nothing happened to the socket since it reported nothing, nor to its arm
		}
		rev := set.evaluate(e, true)
		if rev == 0 && s.armPost(set.bell) {
			// A posted offer's verdict rings the set's bell (post.go).
			rev = set.evaluate(e, true)
		}
		ds := s.direct()
		if rev == 0 && exact && ds != nil && s.armDirect(ds, e.fd, int16(e.events&0xffff), set.bell) != 0 {
			// Armed (the peer rings the socket once), and ready since.
			rev = set.evaluate(e, true)
		}
		// A direct socket's entry rests quiet only while armed: its peer
		// rings for an armed sleeper and for nothing else, and a skipped
		// entry is not armed again. So only an exact scan (which armed
		// it) makes it quiet, and a ring that spent the arm ends the
		// rest: a ring meant for data the program has read since can
		// spend an arm made after it. A ring of the socket says so
		// (filter); a ring of the set's bell names no entry, so the scan
		// looks at the arm words themselves (armHeldLocked).
		e.quiet, e.quietGen = quietable && rev == 0 && (exact || ds == nil), gen
		if rev == 0 {
			continue
		}
		if e.events&epollOneShot != 0 {
			e.disabled = true
		}
		ev[n] = unix.EpollEvent{Events: uint32(uint16(rev))}
		setEpollData(&ev[n], e.data)
		n++
		if n == len(ev) {
			set.rot = (start + i + 1) % size
		}
	}
	for _, e := range fellBack {
		set.toKernelLocked(e)
	}
	return n
}

// quietSkip returns the wake word of e's socket (read before an
// evaluation), and whether an evaluation of e that reports nothing may be
// trusted until the word moves: a scan skips such an entry while its
// word stays (event loops keep many idle connections in a set, and an
// evaluation takes the stream's lock). It relies on the word's contract
// (wake.go): every event of the stream bumps it (blocks moved in or sent,
// space, FIN, reset, the channel's end, shutdown), and what the program
// does to the socket between scans without a bump (recv, send) only
// takes readiness away, which an entry reporting nothing has not got.
// Entries that are not plainly accelerated (connecting, early bytes
// waiting, a shutdown made before the verdict, switching to kernel TCP)
// are always evaluated: their readiness moves outside the word.
// EPOLL_CTL_MOD and the re-add of a dormant entry forget quiet (other
// events asked).
//
// +checklocks:set.mu
func (set *epollSet) quietSkip(e *epollEntry) (gen uint32, ok bool) {
	s := e.sock
	if !e.attended || s.sw.Load() != swNone || s.earlyN.Load() != 0 || s.pendShut.Load() != 0 || s.stream.Load() == nil {
		return 0, false
	}
	if ds := s.direct(); ds != nil {
		// The peer's progress shows in the area (core/direct Conn.Gen),
		// this side's shutdown in the wake word.
		g := ds.conn.Gen()
		return s.wake.gen() + uint32(g) + uint32(g>>32), true
	}
	return s.wake.gen(), true
}

// armHeldLocked reports whether the arm that let quiet entry e rest is
// still in place (a direct socket: its peer rings only an armed sleeper;
// other sockets' events write the set's kick themselves, wake.go). A ring
// of the set's bell does not say whose arm it spent, and a sender that
// published before the scan's arm, and looked at the word only after it,
// spends that arm with nothing new to find: gen has not moved, and the
// entry would rest unarmed while the peer's next send rang nobody
// (sem_wake's two.sleepers, stuck in about 1 run in 100).
//
// +checklocks:set.mu
func (set *epollSet) armHeldLocked(e *epollEntry) bool {
	ds := e.sock.direct()
	return ds == nil || ds.conn.ArmHeld(armEvents(int16(e.events&0xffff)), set.bell)
}

// chanMark is a channel a scan moved; flushed: with a flush.
type chanMark struct {
	c       *mux.Channel
	flushed bool
}

// maxMarks is how many channels set.marks holds before set.chans.
const maxMarks = 8

// markedLocked reports whether the last progressLocked moved c, and
// whether it flushed it.
//
// +checklocks:set.mu
func (set *epollSet) markedLocked(c *mux.Channel) (flushed, ok bool) {
	for i := range set.marks {
		if set.marks[i].c == c {
			return set.marks[i].flushed, true
		}
	}
	if len(set.chans) > 0 {
		flushed, ok = set.chans[c]
	}
	return flushed, ok
}

// markLocked records that progressLocked moved c (flushed: with a flush).
//
// +checklocks:set.mu
func (set *epollSet) markLocked(c *mux.Channel, flushed bool) {
	for i := range set.marks {
		if set.marks[i].c == c {
			set.marks[i].flushed = flushed
			return
		}
	}
	if len(set.marks) < maxMarks {
		set.marks = append(set.marks, chanMark{c, flushed})
		return
	}
	if set.chans == nil {
		set.chans = map[*mux.Channel]bool{}
	}
	set.chans[c] = flushed
}

// progressLocked moves each channel of the set's accelerated sockets
// once (mux.Channel.Progress; flushed when an entry on it asks for
// EPOLLOUT), so that the evaluations after it read the streams without
// pumping: the streams of one peer process share a channel, and pumping
// it per entry made a scan over n entries cost n pumps. The channels it
// moved stay in set.marks (and set.chans) until the next call (under
// set.mu): an entry whose stream appeared since (connecting) is
// evaluated with its own pump.
//
// +checklocks:set.mu
func (set *epollSet) progressLocked(exact bool) {
	clear(set.marks) // no channel kept alive by the scratch
	set.marks = set.marks[:0]
	if len(set.chans) > 0 {
		clear(set.chans)
	}
	var lastC *mux.Channel
	lastFlushed := false
	for _, e := range set.list {
		if e.disabled {
			continue
		}
		st := e.sock.stream.Load()
		if st == nil {
			continue
		}
		c := st.Channel()
		if c == nil {
			continue // direct: nothing to move
		}
		flush := e.wantsOut()
		if c == lastC && (lastFlushed || !flush) {
			continue
		}
		if done, ok := set.markedLocked(c); ok && (done || !flush) {
			continue
		}
		set.markLocked(c, flush)
		lastC, lastFlushed = c, flush
		if exact {
			c.Progress(flush)
		} else {
			c.ProgressPoll(flush)
		}
	}
	set.onlyChan, set.onlyFlushed = nil, false
	if len(set.marks) == 1 {
		set.onlyChan, set.onlyFlushed = set.marks[0].c, set.marks[0].flushed
	}
}

// pumpedLocked reports whether the last progressLocked moved the channel
// of s (flushed too, when write asks).
//
// +checklocks:set.mu
func (set *epollSet) pumpedLocked(s *Socket, write bool) bool {
	st := s.stream.Load()
	if st == nil {
		return false
	}
	c := st.Channel()
	switch {
	case c == nil:
		return true // direct: nothing to move
	case c == set.onlyChan:
		return set.onlyFlushed || !write
	case set.onlyChan != nil:
		return false // the only channel moved is another one
	}
	flushed, ok := set.markedLocked(c)
	return ok && (flushed || !write)
}

// evaluate returns what e reports now (0: nothing), by its mode, after
// progressLocked. commit records the evaluation (edge-triggered state);
// without it evaluate has no side effect.
//
// +checklocks:set.mu
func (set *epollSet) evaluate(e *epollEntry, commit bool) int16 {
	s := e.sock
	pumped := set.pumpedLocked(s, e.wantsOut())
	rev, _, _ := s.pollEventsAt(e.fd, int16(e.events&0xffff), pumped)
	if e.events&epollET == 0 {
		return rev
	}
	arr := s.arrived()
	ns := s.noSpace()
	edge := rev&^e.lastMask != 0 ||
		(rev&unix.POLLIN != 0 && arr > e.lastArr) ||
		(rev&unix.POLLOUT != 0 && ns != e.nospace)
	if commit {
		e.lastMask, e.lastArr = rev, arr
		if rev&unix.POLLOUT != 0 {
			e.nospace = ns
		}
	}
	if !edge {
		return 0
	}
	return rev
}

// nest prepares the set for being watched by the kernel (inside another
// epoll set): its self eventfd, registered in its kernel list.
func (set *epollSet) nest() {
	set.watched.Store(true)
	set.stale()
	set.mu.Lock()
	defer set.mu.Unlock()
	set.unpublishLocked()
	for _, e := range set.list {
		set.armLocked(e) // watched now: direct entries stay armed
	}
	if set.selfFD >= 0 {
		return
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return
	}
	fd = highFD(fd)
	set.p.protect(fd)
	set.selfToken = newEpollToken()
	if set.add(fd, unix.EPOLLIN, set.selfToken) != nil {
		set.p.unprotect(fd)
		unix.Close(fd)
		return
	}
	set.selfFD = fd
	set.syncSelfLocked()
}

// syncSelfLocked signals the self eventfd while a level-triggered entry
// is ready, and empties it when none is.
//
// +checklocks:set.mu
func (set *epollSet) syncSelfLocked() {
	if set.selfFD < 0 {
		return
	}
	pending := false
	set.progressLocked(true)
	for _, e := range set.list {
		if !e.disabled && e.events&epollET == 0 && e.sock.getState() != sockFallback {
			pumped := set.pumpedLocked(e.sock, e.wantsOut())
			if rev, _, _ := e.sock.pollEventsAt(e.fd, int16(e.events&0xffff), pumped); rev != 0 {
				pending = true
				break
			}
		}
	}
	switch {
	case pending && !set.selfOn:
		eventfdAdd(set.selfFD)
	case !pending && set.selfOn:
		var b [8]byte
		unix.Read(set.selfFD, b[:])
	}
	set.selfOn = pending
}

// epollPollEvents answers poll on an emulated epoll fd: readable when an
// entry is ready (kernel entries are not looked at).
func (p *Process) epollPollEvents(epfd int, events int16) int16 {
	set := p.fds.epoll(epfd)
	if set == nil {
		return 0
	}
	set.watched.Store(true) // the poll may sleep on epfd itself
	var ev [1]unix.EpollEvent
	if set.collectPeek(ev[:]) {
		return events & unix.POLLIN
	}
	return kernelPoll(epfd, events)
}

// collectPeek reports whether an entry is ready, without side effects on
// edge-triggered or one-shot entries.
func (set *epollSet) collectPeek(ev []unix.EpollEvent) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.progressLocked(true)
	for _, e := range set.list {
		if e.disabled {
			continue
		}
		if e.sock.getState() != sockFallback && set.evaluate(e, false) != 0 {
			return true
		}
	}
	return false
}

// close releases the set when its last fd closes.
func (set *epollSet) closeFD(fd int) {
	set.stale()
	set.mu.Lock()
	set.fds--
	last := set.fds == 0
	set.unpublishLocked()
	if fd == set.fd && !last {
		set.fdGone = true
	}
	var entries []*epollEntry
	if last {
		for _, e := range set.entries {
			entries = append(entries, e)
			set.removeLocked(e)
		}
		if set.selfFD >= 0 {
			set.p.unprotect(set.selfFD)
			unix.Close(set.selfFD)
			set.selfFD = -1
		}
		set.kickMu.Lock()
		set.p.closeFD(set.kickFD)
		set.kickFD = -1
		set.kickMu.Unlock()
		if set.bell > 0 {
			set.p.bells.retire(set.bell)
		}
	}
	set.mu.Unlock()
	if !last {
		return
	}
	for _, e := range entries {
		e.sock.mu.Lock()
		delete(e.sock.epolls, set)
		e.sock.gateLocked()
		e.sock.mu.Unlock()
	}
	set.p.mu.Lock()
	delete(set.p.epolls, set)
	set.p.mu.Unlock()
}

// inKernelSet reports whether another epoll set of the process lists fd
// (its /proc fdinfo "tfd:" lines); false without /proc. Run once, when an
// epoll fd becomes emulated.
func inKernelSet(fd int) bool {
	dir, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	var buf [64]byte
	want := strconv.Itoa(fd)
	for _, d := range dir {
		n, err := strconv.Atoi(d.Name())
		if err != nil || n == fd {
			continue
		}
		if k, err := unix.Readlink("/proc/self/fd/"+d.Name(), buf[:]); err != nil || string(buf[:k]) != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + d.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "tfd:" && f[1] == want {
				return true
			}
		}
	}
	return false
}

func setEpollData(ev *unix.EpollEvent, v uint64) {
	ev.Fd = int32(uint32(v))
	ev.Pad = int32(uint32(v >> 32))
}

func epollData(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// checkEpollFD returns EBADF or EINVAL when fd is not an open epoll fd.
func checkEpollFD(fd int) unix.Errno {
	var buf [64]byte
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf[:])
	switch {
	case err == unix.ENOENT:
		return unix.EBADF
	case err != nil:
		return 0 // no /proc: the kernel registration below will tell
	case string(buf[:n]) != "anon_inode:[eventpoll]":
		return unix.EINVAL
	}
	return 0
}
