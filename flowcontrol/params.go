package flowcontrol

import (
	"fmt"
	"math"
)

// Params configure a controller. Both ends of a stream must use the same
// values: compare Signature at setup to make sure (a mismatch otherwise
// shows as a protocol error from OnControl or Arrived, which ends the
// channel).
type Params struct {
	// Credits is K, the blocks a credit stream may have unconsumed at the
	// receiver (credit only): 1 to ReceiveCapacity/BlockPayload.
	Credits int
	// VirtualWindow is W, the bytes one window post grants (nicassist
	// only): 1 to ReceiveCapacity.
	VirtualWindow int
	// ReceiveCapacity is the receiver's landing memory in bytes (its blocks
	// times the block size): BlockPayload to 4 GiB-1.
	ReceiveCapacity int
	// BlockPayload is the largest payload one block carries (the
	// transport's MaxPayload): at least 1.
	BlockPayload int
}

// ParamError reports a Params field out of range.
type ParamError struct {
	Algorithm string // the algorithm being configured
	Param     string // the field's name, as in Params
	Value     int
	Want      string // the accepted range, in words
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("flowcontrol %s: %s = %d, want %s", e.Algorithm, e.Param, e.Value, e.Want)
}

// validate checks the fields the named algorithm uses.
func (p Params) validate(name string) error {
	bad := func(param string, v int, want string) error {
		return &ParamError{Algorithm: name, Param: param, Value: v, Want: want}
	}
	if p.BlockPayload < 1 {
		return bad("BlockPayload", p.BlockPayload, "at least 1")
	}
	if p.ReceiveCapacity < p.BlockPayload || uint64(p.ReceiveCapacity) > math.MaxUint32 {
		return bad("ReceiveCapacity", p.ReceiveCapacity,
			fmt.Sprintf("BlockPayload (%d) to %d", p.BlockPayload, uint32(math.MaxUint32)))
	}
	switch name {
	case NameCredit:
		if blocks := p.ReceiveCapacity / p.BlockPayload; p.Credits < 1 || p.Credits > blocks {
			return bad("Credits", p.Credits,
				fmt.Sprintf("1 to ReceiveCapacity/BlockPayload (%d)", blocks))
		}
	case NameNICAssist:
		if p.VirtualWindow < 1 || p.VirtualWindow > p.ReceiveCapacity {
			return bad("VirtualWindow", p.VirtualWindow,
				fmt.Sprintf("1 to ReceiveCapacity (%d)", p.ReceiveCapacity))
		}
	}
	return nil
}

// Signature returns the flow-control name the two ends of a channel
// compare at setup (setup.SetupConfig.Flow: at most 32 printable bytes),
// so that ends built from different Params fail there (setup.ErrMismatch)
// rather than with a protocol error mid-stream: the algorithm and the
// parameters it uses besides the transport's blocks and block size,
// which setup compares on their own ("credit/k=16", "nicassist/w=262144",
// "packed"). ReceiveCapacity and BlockPayload follow from the transport
// and are left out.
func Signature(name string, p Params) string {
	switch name {
	case NameCredit:
		return fmt.Sprintf("%s/k=%d", name, p.Credits)
	case NameNICAssist:
		return fmt.Sprintf("%s/w=%d", name, p.VirtualWindow)
	}
	return name
}
