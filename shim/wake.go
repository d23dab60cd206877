package shim

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How a thread blocked in a socket call sleeps. The C side sleeps in the
// kernel (SDPSHIM_WAIT), never in Go: signals interrupt it with the
// kernel's EINTR and SA_RESTART semantics, and pthread_cancel works. Each
// accelerated socket has a wakeup: a 32-bit word that every event of its
// stream bumps (data, space, FIN, reset, the channel's end), and
//   - threads blocked in recv/send/connect sleep in futex(FUTEX_WAIT) on
//     the word with the value read before their last readiness check, so
//     an event in between is never lost; the event's bump is followed by a
//     FUTEX_WAKE only while such sleepers are registered;
//   - poll and epoll sleep on an eventfd of the socket (created when first
//     needed), written on events while pollers are registered and read
//     empty before each readiness check (poll; epoll registers it
//     edge-triggered and never reads it). For a socket whose only
//     registrations are entries of one emulated epoll set, the write is
//     made only while a thread of that set is armed for a kernel sleep
//     (epollSet.ringWanted): an event that comes while the program is
//     busy costs no syscall, and one write per sleep wakes the set.
//
// The word lives outside the Go heap (a slab of mmap()ed pages), because
// the C side keeps its address across calls; words are recycled but pages
// are never unmapped, so a thread still asleep on a recycled word only
// gets a spurious wakeup.
type wakeup struct {
	word     *uint32
	sleepers atomic.Int32 // futex sleepers registered
	pollers  atomic.Int32 // poll/epoll registrations
	polls    atomic.Int32 // poll/select attendances (part of pollers): every event writes the eventfd
	// gate is the one emulated epoll set holding the socket, whose
	// armed sleepers decide whether an event writes the eventfd; nil when
	// the socket is in several sets or none (every event writes).
	gate     atomic.Pointer[epollSet]
	efd      atomic.Int32  // eventfd + 1; 0 until needed
	efdGen   atomic.Uint32 // bumped when another file took efd's number (adoptDirectLocked)
	efdMu    sync.RWMutex  // held (read) while writing to efd, so release cannot close it meanwhile
	released atomic.Bool
}

func (w *wakeup) init(word *uint32) { w.word = word }

// gen returns the word's current value.
func (w *wakeup) gen() uint32 { return atomic.LoadUint32(w.word) }

// ring announces an event: bump, then wake sleepers and pollers. It is
// called from inside the stream (possibly with its lock held): it must not
// block or call back into the stream.
func (w *wakeup) ring() {
	atomic.AddUint32(w.word, 1)
	if w.sleepers.Load() > 0 {
		futexWake(w.word)
	}
	if w.pollers.Load() > 0 && w.ringWanted() {
		w.efdMu.RLock()
		if fd := w.efd.Load() - 1; fd >= 0 {
			eventfdAdd(int(fd))
		}
		w.efdMu.RUnlock()
	}
}

// ringWanted reports whether an event must write the eventfd: a poll
// sleeps on it, or the socket's set (all of its sets, when several) may
// have a thread asleep in the kernel. Called after the event is published
// (the bump above, the stream's state before it): with the sleeper's
// arm-then-check (epollSet.arm) either the sleeper sees the event or this
// sees it armed.
func (w *wakeup) ringWanted() bool {
	if w.polls.Load() > 0 {
		return true
	}
	set := w.gate.Load()
	return set == nil || set.ringWanted()
}

// wakeAll bumps the word and wakes every thread asleep on it, registered
// or not (a connecting socket's sleepers are not: shim/settle.go).
func (w *wakeup) wakeAll() {
	atomic.AddUint32(w.word, 1)
	futexWake(w.word)
}

// wakeEverything wakes every thread asleep on the socket: on its word
// and, when it has one, on its eventfd (poll, epoll), registered or not.
func (w *wakeup) wakeEverything() {
	w.wakeAll()
	w.efdMu.RLock()
	if fd := w.efd.Load() - 1; fd >= 0 {
		eventfdAdd(int(fd))
	}
	w.efdMu.RUnlock()
}

// eventFD returns the socket's eventfd, creating it (protected) on first
// use; -1 when it cannot be created.
func (w *wakeup) eventFD(p *Process) int {
	if fd := w.efd.Load() - 1; fd >= 0 {
		return int(fd)
	}
	w.efdMu.Lock()
	defer w.efdMu.Unlock()
	if fd := w.efd.Load() - 1; fd >= 0 {
		return int(fd)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1
	}
	fd = highFD(fd)
	p.protect(fd)
	w.efd.Store(int32(fd) + 1)
	return fd
}

// highFD moves fd, a descriptor the shim keeps, to a number at or above
// highBase: the program's own descriptors stay as low as without the shim
// (programs size tables by them: wrk's event loop, select's FD_SETSIZE).
// It returns the new number, or fd when it cannot move it.
func highFD(fd int) int {
	nfd, err := dupHigh(fd)
	if err != nil {
		return fd
	}
	unix.Close(fd)
	return nfd
}

// dupHigh duplicates fd (close-on-exec) to a number at or above highBase,
// for a descriptor the shim keeps or polls on its own.
func dupHigh(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, highBase())
}

// highBase is where the shim's own descriptors go: half the soft
// RLIMIT_NOFILE, at most 65536, at least 64.
var highBase = sync.OnceValue(func() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur < 128 {
		return 64
	}
	return int(min(rl.Cur/2, 1<<16))
})

// drain empties the eventfd (before a readiness check).
func (w *wakeup) drain() {
	w.efdMu.RLock()
	if fd := w.efd.Load() - 1; fd >= 0 {
		var b uint64 // nonblocking eventfd: a raw syscall (eventfdAdd)
		unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b)), 8)
	}
	w.efdMu.RUnlock()
}

// release closes the eventfd; the word goes back to the slab (once).
func (w *wakeup) release(p *Process) {
	if w.released.Swap(true) {
		return
	}
	w.efdMu.Lock()
	fd := w.efd.Swap(0) - 1
	w.efdMu.Unlock()
	if fd >= 0 {
		p.unprotect(int(fd))
		unix.Close(int(fd))
	}
	atomic.AddUint32(w.word, 1)
	futexWake(w.word) // nobody may sleep on a word that changes hands
	p.words.put(w.word)
}

func futexWake(word *uint32) {
	// FUTEX_WAKE, shared (the C side waits without FUTEX_PRIVATE_FLAG); it
	// never blocks, so a raw syscall (eventfdAdd).
	const futexWakeOp = 1
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakeOp, 1<<30, 0, 0, 0)
}

// eventfdAdd adds one to an eventfd (nonblocking: a raw syscall, which
// spares the Go runtime's syscall bookkeeping and sysmon's hand-off of the
// P of a thread it would see in a long syscall).
func eventfdAdd(fd int) {
	one := uint64(1)
	unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one)), 8)
}

// wordSlab hands out 32-bit words in memory outside the Go heap.
type wordSlab struct {
	mu   sync.Mutex
	free []*uint32 // +checklocks:mu
}

const wordPage = 1 << 16

func (s *wordSlab) get() *uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		mem, err := unix.Mmap(-1, 0, wordPage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return new(uint32) // heap fallback: Go's heap does not move objects
		}
		for off := 0; off+64 <= len(mem); off += 64 { // one word per cache line
			s.free = append(s.free, (*uint32)(unsafe.Pointer(&mem[off])))
		}
	}
	w := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return w
}

func (s *wordSlab) put(w *uint32) {
	s.mu.Lock()
	s.free = append(s.free, w)
	s.mu.Unlock()
}
