package wait

import (
	"sync"
	_ "unsafe" // go:linkname

	"golang.org/x/sys/unix"
)

// Spinning politely. Between two polls the waiter executes a CPU pause
// (PAUSE on amd64, YIELD on arm64): the sibling hyperthread gets the core's
// resources and the loop does not flood the memory system. Measured on the
// development VM (AMD EPYC, KVM): one poll of an atomic word plus one pause
// is about 29 ns.
//
// Every yieldEvery polls it also gives the CPU to any other runnable
// thread with sched_yield(2). When both ends of a connection share one core
// a pure spin waits for the scheduler tick at every handoff; measured with
// two processes pinned to one CPU, each calling into a c-shared Go library
// from a C thread and ping-ponging through a shared word:
//
//	pure spin                         5080 us per round trip
//	runtime.Gosched every 16 polls      22 us (a Gosched costs 22 us alone)
//	sched_yield every  4 polls         3.7-4.1 us
//	sched_yield every 16 polls         4.5-5.7 us
//	sched_yield every 64 polls         7.1-8.1 us
//
// runtime.Gosched is no use here: it only lets other goroutines of this
// process run, and inside a cgo callback (a locked thread) it hands the P
// to another thread and parks this one on a futex. sched_yield costs about
// 650 ns on this VM (a raw syscall; the Go runtime needs no notice of a
// call that never blocks) and returns at once when nothing else is
// runnable, so on separate cores it costs nothing but its own time: the
// cross-core round trip stayed at 0.12-0.19 us for every interval. 16
// keeps the co-scheduled handoff near the best; on this VM a long spin then
// spends about 60% of its time in the syscall, which burns no more CPU
// than spinning and delays noticing the condition by at most one yield.
// The Waiter itself (busy policy, same c-shared setup) measured 4.5-4.7 us
// per round trip on one core and 0.16-0.17 us on two.
const yieldEvery = 16

// procyield executes cycles CPU pause instructions.
//
//go:linkname procyield runtime.procyield
func procyield(cycles uint32)

func cpuPause() { procyield(1) }

func schedYield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// LockYielding takes mu, trying up to tries times with a yield of the CPU
// between tries before it blocks. A program's thread inside the core (a
// cgo callback, locked to its thread) that blocks on a held mutex parks:
// its P goes to another thread, which is woken for it, and its own
// thread is woken again through the scheduler, several context switches
// (25-45 us each here) to wait for a holder that keeps the lock for tens
// of microseconds. A yield costs one system call, and gives the holder
// the CPU when it waits on this one.
func LockYielding(mu *sync.Mutex, tries int) {
	for i := 0; i < tries; i++ {
		if mu.TryLock() {
			return
		}
		schedYield()
	}
	mu.Lock()
}
