package rendezvous

import (
	"errors"
	"fmt"
)

// Reason says why a connection stays on kernel TCP. The numeric values are
// stable: they travel in refusal messages, appear in stats and are the
// argument of the fallback probe, so a value is never reused or renumbered.
// docs/reasons.md documents each one (a test keeps it in sync).
type Reason uint8

// Reasons. ReasonNone is not a fallback: it is the zero value.
const (
	ReasonNone Reason = iota
	// ReasonNotShimmed: no live rendezvous entry for the destination, or
	// the listener closed between lookup and offer.
	ReasonNotShimmed
	// ReasonRefused: the peer's uid (SO_PEERCRED) is not allowed, or the
	// listener's handler or limits refused the offer.
	ReasonRefused
	// ReasonTimeout: the listener process did not answer before the
	// deadline (busy, stopped, or its backlog is full).
	ReasonTimeout
	// ReasonProtocol: a malformed or unexpected rendezvous message.
	ReasonProtocol
	// ReasonRunDir: the run directory is missing, unsafe (owner or mode)
	// or not writable.
	ReasonRunDir
	// ReasonExcluded: SDPSHIM_INCLUDE/SDPSHIM_EXCLUDE rules exclude the
	// endpoint.
	ReasonExcluded
	// ReasonNoDevice: no RDMA device or no route to the peer through one.
	ReasonNoDevice
	// ReasonUnsupportedOption: the socket uses an option the accelerated
	// path cannot honour.
	ReasonUnsupportedOption
	// ReasonForkDecline: a fork or exec child cannot enter the transport
	// and declines.
	ReasonForkDecline
	// ReasonBadSetting: a bad SDPSHIM_* value disabled the shim.
	ReasonBadSetting
	// ReasonPeerGone: the peer process died or closed during setup.
	ReasonPeerGone
	// ReasonDeferredUnclaimed: a connection to a group listener (deferred
	// acceptance, deferred.go) that no process used within the deferral
	// deadline, or that was pulled after the connector had fallen back.
	ReasonDeferredUnclaimed
	// ReasonDeferredPlain: a deferred connection whose acceptor sent bytes
	// on kernel TCP (it does not run the shim, or used the socket before
	// the shim saw it): the connector falls back at once.
	ReasonDeferredPlain
	// ReasonShortLived: the connecting process's recent accelerated
	// connections to this destination were short-lived (closed within ten
	// times their setup time), so this one stays on kernel TCP, whose
	// setup is cheaper (shim/shortconn.go).
	ReasonShortLived
	// ReasonFDLimit: the process holds its share of its fd limit in
	// rendezvous connections already (offers waiting for their accept,
	// answers waiting for their verdict: fdshare.go). Kernel TCP holds no
	// fd for a connection in a listener's backlog; past the share new
	// connections stay on kernel TCP, so the program keeps its fds.
	ReasonFDLimit
	// ReasonConnectorLate: the accepting process waited the whole of its
	// wait for the connector to name the port its connect() took (an
	// unbound offer's frame, unbound.go; a deferral record's rename,
	// unboundrec.go): the connector's thread had not come back from
	// connect(), or, where the kernel could not say which connector's
	// the connection is, another connector to the same address had not.
	ReasonConnectorLate

	numReasons // keep last
)

var reasonNames = [numReasons]string{
	ReasonNone:              "none",
	ReasonNotShimmed:        "peer-not-shimmed",
	ReasonRefused:           "rendezvous-refused",
	ReasonTimeout:           "rendezvous-timeout",
	ReasonProtocol:          "protocol-error",
	ReasonRunDir:            "rundir-unusable",
	ReasonExcluded:          "excluded-by-rule",
	ReasonNoDevice:          "no-device-or-route",
	ReasonUnsupportedOption: "unsupported-option",
	ReasonForkDecline:       "fork-exec-decline",
	ReasonBadSetting:        "disabled-by-setting",
	ReasonPeerGone:          "peer-gone",
	ReasonDeferredUnclaimed: "deferred-unclaimed",
	ReasonDeferredPlain:     "deferred-acceptor-plain",
	ReasonShortLived:        "short-lived",
	ReasonFDLimit:           "fd-limit",
	ReasonConnectorLate:     "connector-late",
}

// String returns the reason's stable short name, as used in stats output.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason-%d", uint8(r))
}

// Valid reports whether r is a known reason (ReasonNone included).
func (r Reason) Valid() bool { return r < numReasons }

// Reasons returns every known reason except ReasonNone, in numeric order.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := ReasonNone + 1; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// FallbackError is an error after which the connection stays on kernel
// TCP. Every error returned by Lookup, Offer and Register is one (find it
// with errors.As).
type FallbackError struct {
	Reason Reason
	Err    error
}

func (e *FallbackError) Error() string {
	if e.Err == nil {
		return "sdpshim fallback: " + e.Reason.String()
	}
	return "sdpshim fallback (" + e.Reason.String() + "): " + e.Err.Error()
}

func (e *FallbackError) Unwrap() error { return e.Err }

// fallback wraps err with reason r, keeping an inner FallbackError's reason
// when err already carries one.
func fallback(r Reason, err error) error {
	var fe *FallbackError
	if errors.As(err, &fe) {
		return err
	}
	return &FallbackError{Reason: r, Err: err}
}

// ReasonOf returns the reason carried by err, ReasonNone for nil, and
// ReasonProtocol for an error that carries none.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	var fe *FallbackError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ReasonProtocol
}

// Errors wrapped inside FallbackError.
var (
	// ErrNoEntry: no live listener is registered for the destination.
	ErrNoEntry = errors.New("no rendezvous entry")
	// ErrUIDNotAllowed: the peer's SO_PEERCRED uid is not in the allowed set.
	ErrUIDNotAllowed = errors.New("peer uid not allowed")
	// ErrClosed: the Node was closed.
	ErrClosed = errors.New("rendezvous node closed")
)

// RefusedError is a refusal sent by the listener process: the reason code
// and the short text it sent.
type RefusedError struct {
	Reason Reason
	Text   string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("listener refused (%s): %s", e.Reason, e.Text)
}
