package rendezvous

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/core/wait"
)

// Answer is a positive answer to an Offer. The caller owns Payload.Files.
//
// Sequence on the connector: Commit, then the real connect(); or Abort,
// then a plain connect(). The acceptor's accept() claims the connection
// only if Commit came first, so both sides agree whether the connection
// is accelerated, even when the connector gave up late.
//
// A positive answer is not yet the acceptor's decision: the connection is
// accelerated when accept() claims it. Until then the pending offer may
// expire (accept() later than Config.PendingTimeout, or SO_REUSEPORT or a
// forked worker handing the connection to another process), and that
// connection is plain TCP at the acceptor. The listener sends a one-byte
// verdict when it claims or drops the offer: Verdict and WaitVerdict read
// it, and Fd can be polled for it. A caller that closes the Answer right
// after Commit must learn the outcome another way (the channel layer's
// shared-memory flag).
type Answer struct {
	Payload Payload

	g         *guardedFD
	committed bool
	verdict   Verdict
}

// Verdict is the acceptor's decision on a committed offer.
type Verdict uint8

// Verdicts.
const (
	VerdictPending  Verdict = iota // not decided yet
	VerdictAccepted                // accept() claimed it: accelerated
	VerdictDeclined                // dropped (expired, aborted, listener gone): plain TCP
)

func (v Verdict) String() string {
	switch v {
	case VerdictAccepted:
		return "accepted"
	case VerdictDeclined:
		return "declined"
	}
	return "pending"
}

// Commit tells the listener that the connector is about to connect() on
// the offered 4-tuple; call it immediately before connect(). An error
// (the listener is gone) means: do not accelerate; Abort and connect
// plainly.
func (a *Answer) Commit() error {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	if a.g.closed || a.committed {
		return &FallbackError{ReasonProtocol, fmt.Errorf("commit: answer closed or already committed")}
	}
	if !sendByte(a.g.fd, commitByte) {
		return &FallbackError{ReasonPeerGone, fmt.Errorf("commit: listener gone")}
	}
	a.committed = true
	return nil
}

// Abort withdraws the offer: the acceptor will not claim the connection.
// Call it before a plain connect(). Same as Close.
func (a *Answer) Abort() { a.g.close() }

// Close releases the rendezvous connection. Before Commit it aborts;
// after Commit it only stops listening for the verdict. It does not close
// Payload.Files.
func (a *Answer) Close() { a.g.close() }

// Fd returns the rendezvous connection, readable when the verdict has
// arrived, for the caller's poller; valid until Close. Do not read it.
func (a *Answer) Fd() int {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	return a.g.fd
}

// Verdict returns the acceptor's verdict without waiting. Before Commit
// and after Close it is VerdictPending unless a verdict was already read.
func (a *Answer) Verdict() Verdict {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	if a.verdict != VerdictPending || !a.committed || a.g.closed {
		return a.verdict
	}
	b, ok, eof := recvByte(a.g.fd)
	switch {
	case ok && b == verdictAccepted:
		a.verdict = VerdictAccepted
	case ok || eof:
		a.verdict = VerdictDeclined
	}
	return a.verdict
}

// WaitVerdict waits up to timeout for the verdict and returns it
// (VerdictPending when the time ran out). It holds the Answer while it
// waits: a concurrent Close or Verdict waits for it.
func (a *Answer) WaitVerdict(timeout time.Duration) Verdict {
	deadline := time.Now().Add(timeout)
	for {
		if v := a.Verdict(); v != VerdictPending {
			return v
		}
		a.g.mu.Lock()
		fd, usable := a.g.fd, a.committed && !a.g.closed
		if usable {
			// Poll under the lock: Close cannot recycle fd meanwhile.
			usable = wait.WaitFD(fd, unix.POLLIN, deadline) == nil
		}
		a.g.mu.Unlock()
		if !usable {
			return a.Verdict()
		}
	}
}
