package probes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
)

// ErrClosed is returned by ReadEvent after Close.
var ErrClosed = os.ErrClosed

// EventKind says which probe fired.
type EventKind int32

// Event kinds (enum event_kind in bpf/trace.c).
const (
	EventFallback    EventKind = 1
	EventAccelerated EventKind = 2
)

func (k EventKind) String() string {
	switch k {
	case EventFallback:
		return "FALLBACK"
	case EventAccelerated:
		return "ACCELERATED"
	}
	return fmt.Sprintf("event-%d", int32(k))
}

// Event is one probe call in some process.
type Event struct {
	Kind     EventKind
	Time     time.Duration // CLOCK_MONOTONIC
	PID, TID uint32
	Comm     string
	// Code is the reason (EventFallback, docs/reasons.md) or the
	// transport (EventAccelerated: 1 shm, 2 rdma).
	Code   int
	FD     int
	Cookie uint64 // SO_COOKIE of the socket, 0 when the process did not say
}

// ReadEvent blocks until a probe fires, the deadline set by
// SetEventDeadline passes (os.ErrDeadlineExceeded), or Close (ErrClosed).
func (t *Tracer) ReadEvent() (Event, error) {
	rec, err := t.events.Read()
	if err != nil {
		if errors.Is(err, ringbuf.ErrClosed) {
			return Event{}, ErrClosed
		}
		return Event{}, err
	}
	var raw traceEvent
	if err := binary.Read(bytes.NewReader(rec.RawSample), binary.NativeEndian, &raw); err != nil {
		return Event{}, fmt.Errorf("malformed event: %w", err)
	}
	return Event{
		Kind: EventKind(raw.Kind), Time: time.Duration(raw.TimeNs), PID: raw.Pid, TID: raw.Tid,
		Comm: cString(raw.Comm[:]), Code: int(raw.Code), FD: int(raw.Fd), Cookie: raw.Cookie,
	}, nil
}

// SetEventDeadline makes ReadEvent return os.ErrDeadlineExceeded once t
// passes; the zero time waits forever.
func (t *Tracer) SetEventDeadline(d time.Time) { t.events.SetDeadline(d) }

// EventsLost returns how many events were dropped because the ring
// buffer was full (the reader fell behind).
func (t *Tracer) EventsLost() uint64 {
	var n uint64
	if t.objs.EventsLost != nil {
		t.objs.EventsLost.Get(&n)
	}
	return n
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
