package flowcontrol

import (
	"errors"
	"fmt"

	"github.com/sdpshim/sdpshim/core/wire"
)

// Algorithm names, as SDPSHIM_FLOW spells them.
const (
	NameCredit    = "credit"
	NamePacked    = "packed"
	NameNICAssist = "nicassist"
)

// ErrUnknownAlgorithm is wrapped by New for a name it does not know.
var ErrUnknownAlgorithm = errors.New("unknown flow-control algorithm")

// Names lists the algorithms New accepts.
func Names() []string { return []string{NameCredit, NamePacked, NameNICAssist} }

// New validates p for the named algorithm and returns a factory that makes
// one controller per stream end. An error is a *ParamError naming the bad
// field, or wraps ErrUnknownAlgorithm.
func New(name string, p Params) (func() wire.FlowController, error) {
	var mk func(Params) wire.FlowController
	switch name {
	case NameCredit:
		mk = func(p Params) wire.FlowController { return newCredit(p) }
	case NamePacked:
		mk = func(p Params) wire.FlowController { return newPacked(p) }
	case NameNICAssist:
		mk = func(p Params) wire.FlowController { return newNICAssist(p) }
	default:
		return nil, fmt.Errorf("flowcontrol: %w %q (want one of %v)", ErrUnknownAlgorithm, name, Names())
	}
	if err := p.validate(name); err != nil {
		return nil, err
	}
	return func() wire.FlowController { return mk(p) }, nil
}

// protocolError reports a control record or arrival the algorithm rejects:
// the peer is hostile or broken.
func protocolError(name, format string, args ...any) error {
	return fmt.Errorf("flowcontrol %s: %w: %s", name, wire.ErrProtocol, fmt.Sprintf(format, args...))
}
