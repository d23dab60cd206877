package shim

import "github.com/sdpshim/sdpshim/core/rendezvous"

// This file mirrors the C ABI of preload/c/sdpshim_core.h: the states of
// the interposer's fd table, the special hook results, the wait request
// and the reason numbering. preload/entry converts between these and the
// C types; nothing else in the shim knows about C.

// FDState is the interposer's per-fd state (enum sdpshim_fd_state).
type FDState int

// Fd states.
const (
	// FDUnmanaged: every call goes straight to libc; the shim never sees it.
	FDUnmanaged FDState = 0
	// FDCandidate: a TCP socket not decided yet (before connect/accept), or
	// a listener; its calls reach the shim, which mostly passes them.
	FDCandidate FDState = 1
	// FDManaged: an accelerated socket (or one whose rendezvous is done and
	// whose verdict is pending), or an epoll fd whose waits are emulated.
	FDManaged FDState = 2
	// FDProtected: owned by the core or the Go runtime, invisible to the
	// program.
	FDProtected FDState = 3
)

// Special hook results, outside the -errno range.
const (
	// Pass: the interposer makes the original libc call itself.
	Pass = -0x10000
	// WaitResult: the call would block; the Wait filled in says how the
	// interposer sleeps before calling the hook again.
	WaitResult = -0x10001
)

// Host is what the interposer offers the core (struct sdpshim_host). All
// methods are safe for concurrent use and never block.
type Host interface {
	// FDState returns the state of fd (FDUnmanaged for any fd never set).
	FDState(fd int) FDState
	// SetFDState sets the state of fd; an error only for fd < 0 or when the
	// table cannot grow.
	SetFDState(fd int, st FDState) error
	// CountFallback counts one connection that stays on kernel TCP, by
	// reason (see Reason).
	CountFallback(reason int)
}

// Reason codes (enum sdpshim_reason): the stable codes of docs/reasons.md.
// 1..63 are rendezvous.Reason values, counted as they are; the
// interposer numbers its own from 64.
const (
	ReasonShimOff = 64 // SDPSHIM_ENABLE=0: init declines with it
	ReasonMax     = 128
)

// coreReason is the code a rendezvous reason is counted under.
func coreReason(r rendezvous.Reason) int { return int(r) }

// WaitKind says how the interposer sleeps (enum sdpshim_wait_kind).
type WaitKind int32

// Wait kinds.
const (
	// WaitFutex: futex(FUTEX_WAIT) on Word while it holds Val (shared,
	// not private).
	WaitFutex WaitKind = 1
	// WaitFD: ppoll on FD for Events.
	WaitFD WaitKind = 2
)

// Wait is struct sdpshim_wait: filled by a hook that returns WaitResult.
type Wait struct {
	Kind    WaitKind
	FD      int32
	Events  int16
	Val     uint32
	Word    *uint32 // a 32-bit word outside the Go heap
	Timeout int64   // nanoseconds, relative; < 0: none
	Done    uint64  // bytes this call moved before it had to wait
}

// Fork kinds (enum sdpshim_fork_kind).
const (
	ForkFork  = 1 // fork(): the child runs on without the core
	ForkSpawn = 2 // posix_spawn: the child execs
)
