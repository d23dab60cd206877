package rendezvous

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
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
//
// The Answer of a committed offer (OfferCommitted) is committed from the
// start, and its Payload is empty until Verdict reads the answer, which
// is the verdict "accepted"; Refusal then tells why one was declined.
type Answer struct {
	Payload Payload

	g         *guardedFD
	committed bool
	oneWay    bool  // a committed offer's: the answer is the verdict
	tuple     Tuple // oneWay: the connection offered
	verdict   Verdict
	refusal   error          // oneWay: why it was declined, when the listener said
	answered  *atomic.Uint64 // oneWay: the Node's count of positive answers
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
	if a.oneWay && !a.g.closed {
		return nil // the offer was its commit
	}
	if a.g.closed || a.committed {
		return &FallbackError{ReasonProtocol, fmt.Errorf("commit: answer closed or already committed")}
	}
	if !sendByte(a.g.fd, commitByte) {
		return &FallbackError{ReasonPeerGone, fmt.Errorf("commit: listener gone")}
	}
	a.committed = true
	return nil
}

// Bound completes an unbound committed offer (its client port 0:
// unbound.go). Call it right after connect() returned 0 or EINPROGRESS,
// with the socket's local address then (getsockname), which the kernel's
// connect() chose: the listener files the offer under that 4-tuple. An
// error (the listener gone) leaves the connection plain: Abort then. It
// does nothing for any other Answer.
func (a *Answer) Bound(local netip.AddrPort) error {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	if !a.oneWay || !a.tuple.unbound() {
		return nil
	}
	if a.g.closed {
		return &FallbackError{ReasonProtocol, errors.New("bound: answer closed")}
	}
	t := Tuple{Client: local, Server: a.tuple.Server}
	if !t.valid() {
		return &FallbackError{ReasonProtocol, fmt.Errorf("bound: local address %s: %w", local, errMessage)}
	}
	m := message{kind: kindBound, tuple: t, pid: ownPID}
	if err := sendFrame(a.g.fd, m.encode(), nil, time.Now().Add(answerSendTimeout)); err != nil {
		return ioFallback("send bound", err)
	}
	a.tuple = t
	return nil
}

// Abort withdraws the offer: the acceptor will not claim the connection.
// Call it before a plain connect(). Same as Close, except for a committed
// offer whose verdict is pending: Abort tells the listener first (its
// claim then declines), while a Close alone, like the connector's death,
// leaves the offer standing.
func (a *Answer) Abort() {
	a.g.mu.Lock()
	if a.oneWay && !a.g.closed && a.verdict == VerdictPending {
		sendByte(a.g.fd, abortByte)
	}
	a.g.mu.Unlock()
	a.g.close()
}

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
	if a.oneWay {
		a.readAnswerLocked()
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

// Refusal returns why the listener declined a committed offer, when it
// said (a *FallbackError with its reason); nil otherwise.
func (a *Answer) Refusal() error {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	return a.refusal
}

// readAnswerLocked reads a committed offer's answer without waiting:
// accepted with the answer in Payload, declined on a refusal (kept in
// refusal), the connection's end or a malformed frame; pending while
// nothing came. The listener sends its frame in one piece, so a frame
// that began is read whole (bounded by answerSendTimeout's wait). a.g.mu
// held.
func (a *Answer) readAnswerLocked() {
	var buf [peekLen]byte
	seen, queued, eof := peekFrame(a.g.fd, &buf)
	if !queued && !eof {
		return
	}
	a.verdict = VerdictDeclined
	if eof {
		return
	}
	r, files, err := recvQueued(a.g.fd, seen)
	switch {
	case err != nil:
	case r.kind == kindRefusal:
		a.refusal = &FallbackError{r.reason, &RefusedError{Reason: r.reason, Text: string(r.data)}}
		err = a.refusal
	case r.kind != kindAnswer:
		err = fmt.Errorf("kind %d, want answer: %w", r.kind, errMessage)
	case r.nfiles != len(files):
		err = fmt.Errorf("%d files announced, %d received: %w", r.nfiles, len(files), errMessage)
	case r.tuple.canon() != a.tuple.canon():
		err = fmt.Errorf("answer for %s, offered %s: %w", r.tuple, a.tuple, errMessage)
	}
	if err != nil {
		closeFiles(files)
		if a.refusal == nil {
			a.refusal = fallback(ReasonProtocol, err)
		}
		return
	}
	a.Payload = Payload{Data: r.data, Files: files}
	a.verdict = VerdictAccepted
	a.answered.Add(1)
}
