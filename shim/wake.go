package shim

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/fdhook"
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
//   - poll and select sleep with an eventfd of their thread in their set
//     (preload/c/pollkick.c), which an event writes (Host PollKick) while
//     they attend the socket;
//   - epoll sleeps on the set's kick eventfd, registered in the set's
//     kernel list (epollSet.kick). For a socket whose only registrations
//     are entries of one emulated epoll set, the write is made only while
//     a thread of that set is armed for a kernel sleep
//     (epollSet.ringWanted): an event that comes while the program is
//     busy costs no syscall, and one write per sleep wakes the set.
//
// No socket has an fd of its own for this: a connection costs the program
// one fd, as on kernel TCP. A direct connection's peer rings the socket
// itself (direct.go); what wakes here is what this process does (a
// shutdown, a switch to kernel TCP, a verdict) and the mux streams.
//
// The word lives outside the Go heap (a slab of mmap()ed pages), because
// the C side keeps its address across calls; words are recycled but pages
// are never unmapped, so a thread still asleep on a recycled word only
// gets a spurious wakeup.
type wakeup struct {
	p        *Process
	word     *uint32
	sleepers atomic.Int32 // futex sleepers registered
	pollers  atomic.Int32 // poll/epoll registrations
	polls    atomic.Int32 // poll/select attendances (part of pollers): every event kicks them
	// gate is the one emulated epoll set holding the socket, whose
	// armed sleepers decide whether an event writes its kick; nil when
	// the socket is in several sets or none (every event kicks them all).
	gate atomic.Pointer[epollSet]
	sets atomic.Pointer[[]*epollSet] // the emulated epoll sets holding the socket
	// direct: the interposer may have poll sleepers on the socket that
	// no attendance counts (preload/c/poll.c answers direct sockets).
	direct   atomic.Bool
	released atomic.Bool
	// exposed: a thread was given the word to sleep on unregistered (a
	// connecting or switching socket's data call, expose); until then
	// only registered sleepers can be asleep on it, and a bump without
	// them makes no futex call.
	exposed atomic.Bool
}

func (w *wakeup) init(p *Process, word *uint32) { w.p, w.word = p, word }

// gen returns the word's current value.
func (w *wakeup) gen() uint32 { return atomic.LoadUint32(w.word) }

// expose says that the caller hands the word to a thread that sleeps on
// it without registering (sleepers): from now on every bump wakes it.
// The thread read the word's value before it looked at what it waits
// for; a bump that came after that look but did not see exposed came
// after the value too, and the sleep returns at once.
func (w *wakeup) expose() { w.exposed.Store(true) }

// ring announces an event: bump, then wake sleepers and pollers. It is
// called from inside the stream (possibly with its lock held): it must not
// block or call back into the stream.
func (w *wakeup) ring() {
	w.wakeAll()
	if w.pollers.Load() > 0 {
		if w.polls.Load() > 0 {
			w.pollKick()
		}
		if set := w.gate.Load(); set != nil {
			if set.ringWanted() {
				set.kick()
			}
		} else {
			w.kickSets()
		}
	}
}

// kickSets writes the kick eventfd of every epoll set holding the socket.
func (w *wakeup) kickSets() {
	if sets := w.sets.Load(); sets != nil {
		for _, set := range *sets {
			set.kick()
		}
	}
}

// pollKick wakes the threads asleep in the interposer's poll engine.
func (w *wakeup) pollKick() {
	if w.p != nil {
		if h, ok := w.p.host.(pollKickHost); ok {
			h.PollKick()
		}
	}
}

// pollKickHost is a Host whose interposer wakes its poll sleepers on
// request (preload/c/pollkick.c).
type pollKickHost interface {
	// PollKick makes every thread asleep in poll, ppoll, select or pselect
	// over managed sockets look again.
	PollKick()
}

// wakeAll bumps the word and wakes every thread asleep on it, registered
// or not (a connecting socket's sleepers are not: shim/settle.go); the
// futex call only once one may be there (sleepers, expose).
func (w *wakeup) wakeAll() {
	atomic.AddUint32(w.word, 1)
	if w.exposed.Load() || w.sleepers.Load() > 0 {
		futexWake(w.word)
	}
}

// wakeEverything wakes every thread asleep on the socket, registered or
// not: on its word, in its epoll sets, and in poll while one attends it
// (or the interposer may answer a poll on it alone: a direct socket).
func (w *wakeup) wakeEverything() {
	w.wakeAll()
	w.kickSets()
	if w.polls.Load() > 0 || w.direct.Load() {
		w.pollKick()
	}
}

// highFD moves fd, a descriptor the shim keeps, to a number at or above
// fdhook.HighBase: the program's own descriptors stay as low as without the shim
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

// dupHigh duplicates fd (close-on-exec) to a number at or above fdhook.HighBase,
// for a descriptor the shim keeps or polls on its own.
func dupHigh(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, fdhook.HighBase())
}

// release gives the word back to the slab (once).
func (w *wakeup) release(p *Process) {
	if w.released.Swap(true) {
		return
	}
	w.wakeAll() // nobody may sleep on a word that changes hands
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
