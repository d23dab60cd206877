package stats

import (
	"strconv"

	"github.com/sdpshim/sdpshim/core/rendezvous"
)

// MaxReason bounds fallback reason codes (SDPSHIM_REASON_MAX): codes
// 1..63 are rendezvous.Reason values, 64..127 the interposer's own
// (preload/c/sdpshim_core.h, enum sdpshim_reason).
const MaxReason = 128

// interposerFirst is the first code the interposer numbers itself.
const interposerFirst = 64

// interposerReasons names the interposer's codes, as
// preload/c/sdpshim_core.h documents them.
var interposerReasons = [...]string{
	"shim-off", "secure-exec", "go-host", "core-missing", "core-incomplete",
	"core-declined", "core-failed", "core-busy", "vfork-child",
}

// ReasonName returns the stable short name of a fallback code: the
// rendezvous.Reason name below 64, the interposer's name from 64, and
// "reason-N" for an unknown code.
func ReasonName(code int) string {
	switch {
	case code >= 0 && code < interposerFirst && rendezvous.Reason(code).Valid():
		return rendezvous.Reason(code).String()
	case code >= interposerFirst && code-interposerFirst < len(interposerReasons):
		return interposerReasons[code-interposerFirst]
	}
	return "reason-" + strconv.Itoa(code)
}
