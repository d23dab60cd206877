package mux

import (
	"github.com/sdpshim/sdpshim/core/wire"
)

// Flow returns the stream's flow controller, for its optional abilities
// (counters: flowcontrol.StatsSource). It is set when the stream is made
// and never changes.
//
// +checklocksignore: fc is written once, before the stream is published.
func (s *Stream) Flow() wire.FlowController { return s.fc }
