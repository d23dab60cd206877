package seed000

import "runtime"

// spinProcs is GOMAXPROCS for the experiments whose sides poll. The shm
// provider runs two-sided operations (the sliding window's
// WRITE_WITH_IMM and acknowledgement SEND) on a "software NIC" goroutine
// that stands in for the NIC's hardware; when every P of a process is
// polling, that goroutine waits for Go's preemption (10 ms) before it
// runs. Two spare Ps keep it runnable, as a NIC would be, without changing
// what the status-byte path does (its one-sided operations run on the
// posting goroutine). BenchmarkWaiterBusyEveryP (core/wait/waiter_bench_test.go)
// measures that wait; docs/waiting.md says why the waiter cannot avoid it.
const spinProcs = 4

// setProcs sets GOMAXPROCS to n (0: leave it) and returns what restores
// the previous value.
func setProcs(n int) (restore func()) {
	if n <= 0 {
		return func() {}
	}
	old := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(old) }
}
