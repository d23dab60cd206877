package shim

// Publishing an emulated epoll set to the interposer, which then answers
// waits on it without entering the core (preload/c/epollfast.c): when
// every live entry is a direct socket, level- or edge-triggered (not
// one-shot or exclusive), registered in the kernel's set for its peer's
// rings, and no other set or poll watches this one. The snapshot (the entries, and the tokens of the core's own kernel
// registrations, so that the interposer can tell the kernel's events for
// the program from the core's) is taken at the end of the core's waits;
// every change of the set marks it stale first (a sleeping interposer
// thread is kicked through the set's kick eventfd and hands its wait to
// the core, which publishes again).

// EsetEntry is one socket entry of a published set.
type EsetEntry struct {
	FD     int32 // the program's socket, registered for its peer's rings
	Events uint32
	Data   uint64
	// EPOLLET's state (epollEntry's lastMask, lastArr, nospace), which
	// the interposer's waits move on from; NSBase: the socket's count of
	// writes that found no room kept outside the direct handle.
	LastMask       uint32
	LastArr        uint64
	LastNS, NSBase uint32
	// Token is the socket's token in the kernel's set: its peer's rings
	// come under it (the interposer wakes a parked entry for them).
	Token uint64
}

// epollFastHost is a Host whose interposer answers waits on published
// sets (preload/entry's cHost).
type epollFastHost interface {
	// EpollPublish installs the snapshot for epfd (nil ents: takes any
	// installed one away) and frees the one it replaces, once no
	// interposer thread reads it; kickFD is the set's kick eventfd, bell
	// its number among the process's bells (0: none); toks, ascending,
	// is copied before it returns. It reports whether a snapshot is
	// installed now.
	EpollPublish(epfd int, ents []EsetEntry, toks []uint64, kickFD, bell int) bool
	// EpollStale marks epfd's installed snapshot stale: the next wait on
	// it goes through the core, and a thread asleep on it is kicked.
	EpollStale(epfd int)
	// EpollUpdate sets the events of fd's entry in epfd's fresh snapshot,
	// whose data must be data (an EPOLL_CTL_MOD that keeps the entry one
	// the interposer answers for), and wakes the set's sleepers when
	// events were added. It reports false when it did nothing: no fresh
	// snapshot, no such entry, other data, or an older interposer.
	EpollUpdate(epfd, fd int, events uint32, data uint64) bool
	// EpollAppend appends e to epfd's fresh snapshot, whose tokens
	// must all be below e's, and wakes the set's sleepers. It reports
	// false when it did nothing: no fresh snapshot, no room left in it,
	// a token not the largest, or an older interposer.
	EpollAppend(epfd int, e EsetEntry) bool
}

// addInPlace makes an EPOLL_CTL_ADD of fd, a direct socket in its plain
// state that the set does not hold under any number, and appends the
// entry to the published snapshot too instead of marking it stale: a
// server accepting connections into one set otherwise sent the wait after
// each accept through the core, which scanned every entry and published
// them all again (1000 connections: 0.4 s of server CPU, O(N) per
// accept). A snapshot with no room left (it has room for as many entries
// again) is marked stale, and the next one has room. It reports whether it
// did the ADD.
func (set *epollSet) addInPlace(fd int, s *Socket, events uint32, data uint64) bool {
	h, ok := set.p.host.(epollFastHost)
	if !ok || s == nil || events&(epollOneShot|epollExclusive) != 0 || !set.pub.Load() || s.direct() == nil {
		return false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.pubDirty.Load() || !set.pub.Load() || set.entries[fd] != nil || set.dormant > 0 {
		return false
	}
	e := set.newEntryLocked(fd, s, events, data)
	if ent, ok := e.esetEntry(); !ok || !h.EpollAppend(set.fd, ent) {
		set.changedLocked(true) // the entry is in the set, not in the snapshot
	}
	return true
}

// esetEntry returns e as a snapshot entry; false when the interposer
// cannot answer for it: a socket that is not a plain direct one (no
// switch to kernel TCP, not shut down for reading, no bytes written
// before the verdict left) registered for its rings.
func (e *epollEntry) esetEntry() (EsetEntry, bool) {
	s := e.sock
	if !e.sockReg || e.tcpReg || e.answerFD >= 0 || s.direct() == nil || s.sw.Load() != swNone || s.shutRD.Load() ||
		s.earlyN.Load() != 0 {
		return EsetEntry{}, false
	}
	return EsetEntry{FD: int32(e.fd), Events: e.events, Data: e.data, LastMask: uint32(uint16(e.lastMask)),
		LastArr: e.lastArr, LastNS: e.nospace, NSBase: s.nospace.Load(), Token: e.token}, true
}

// modInPlace makes an EPOLL_CTL_MOD of fd that only changes the events of
// a level-triggered entry of the published snapshot in the snapshot too,
// instead of marking it stale: event loops that switch EPOLLOUT on while a
// reply is pending and off once it went (wrk, redis) would otherwise send
// every wait after each switch through the core, which publishes again.
// It reports whether it did the MOD.
func (set *epollSet) modInPlace(fd int, events uint32, data uint64) bool {
	h, ok := set.p.host.(epollFastHost)
	if !ok || events&(epollET|epollOneShot|epollExclusive) != 0 || !set.pub.Load() {
		return false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	e := set.entries[fd]
	if e == nil || e.dormant || e.disabled || e.data != data || e.events&(epollET|epollOneShot|epollExclusive) != 0 ||
		set.pubDirty.Load() || !set.pub.Load() || !h.EpollUpdate(set.fd, fd, events, data) {
		return false
	}
	e.events, e.lastMask, e.lastArr = events, 0, 0
	e.quiet = false
	return true
}

// stale marks the set's snapshot stale (any thread; no lock needed).
func (set *epollSet) stale() {
	set.pubDirty.Store(true)
	if set.pub.Load() {
		if h, ok := set.p.host.(epollFastHost); ok {
			h.EpollStale(set.fd)
		}
	}
}

// publish publishes the set again when it changed since, or when it has
// no snapshot and an entry may have become a plain direct socket since
// (not when what keeps it out, an entry's flags or the set's watchers,
// can change only through the set: pubBarred).
func (set *epollSet) publish() {
	if (set.pub.Load() || set.pubBarred.Load()) && !set.pubDirty.Load() {
		return
	}
	set.mu.Lock()
	set.publishLocked()
	set.mu.Unlock()
}

// publishLocked installs the set's snapshot, or takes it away when the
// interposer cannot answer for the set.
//
// +checklocks:set.mu
func (set *epollSet) publishLocked() {
	h, ok := set.p.host.(epollFastHost)
	if !ok {
		return
	}
	set.pubDirty.Store(false)
	ents, barred := set.eligibleLocked()
	set.pubBarred.Store(barred)
	if len(ents) > 0 {
		set.kickLocked()
	}
	if len(ents) == 0 || set.kickFD < 0 {
		if set.pub.Load() {
			h.EpollPublish(set.fd, nil, nil, -1, 0)
			set.pub.Store(false)
		}
		return
	}
	// The set's tokens, retired ones and the kick's, ascending (no self
	// eventfd here: a set that has one is not published).
	if h.EpollPublish(set.fd, ents, set.ours, set.kickFD, set.bell) {
		set.pub.Store(true)
		set.pubSeen.Store(true)
	} else {
		set.pub.Store(false)
	}
}

// eligibleLocked returns the snapshot's entries, or nil when the
// interposer cannot answer for the set: an entry one-shot or exclusive, a
// socket that is not a plain direct one registered for its rings, the set watched by another set or poll, or named by
// several fds. barred: nil for a reason only a change of the set (which
// marks it dirty) can take away.
//
// +checklocks:set.mu
func (set *epollSet) eligibleLocked() (ents []EsetEntry, barred bool) {
	if set.watched.Load() || set.selfFD >= 0 || set.fds != 1 || set.fdGone {
		return nil, true
	}
	for _, e := range set.list {
		if e.dormant {
			continue
		}
		if e.events&(epollOneShot|epollExclusive) != 0 || e.disabled {
			return nil, true
		}
		ent, ok := e.esetEntry()
		if !ok {
			return nil, false
		}
		ents = append(ents, ent)
	}
	return ents, false
}

// unpublishLocked takes the snapshot away.
//
// +checklocks:set.mu
func (set *epollSet) unpublishLocked() {
	if h, ok := set.p.host.(epollFastHost); ok && set.pub.Load() {
		h.EpollPublish(set.fd, nil, nil, -1, 0)
	}
	set.pub.Store(false)
}
