package stats

import (
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
	"github.com/sdpshim/sdpshim/flowcontrol"
)

// Version is the snapshot format's version, the "version" field of every
// snapshot. It is bumped when a field changes meaning or is removed;
// adding a field does not bump it (readers ignore unknown fields).
const Version = 1

// Snapshot is a process's counters at one moment, as the stats socket
// serves it (JSON). Counters are monotonic; each is read atomically, and
// the connection list is consistent with the totals (see the package doc).
type Snapshot struct {
	Version         int               `json:"version"`
	Process         Process           `json:"process"`
	Time            time.Time         `json:"time"`
	Totals          Totals            `json:"totals"`
	Connections     []ConnStats       `json:"connections"`
	Channels        []ChannelSnapshot `json:"channels"`
	Flow            FlowStats         `json:"flow"` // over every connection, closed ones included
	Waiters         []WaiterSnapshot  `json:"waiters"`
	Scheduler       SchedulerStats    `json:"scheduler"`
	Fallbacks       []ReasonCount     `json:"fallbacks"` // codes with a non-zero count
	RecentFallbacks []FallbackEvent   `json:"recent_fallbacks"`
	Events          map[string]uint64 `json:"events"` // named setup events (Registry.Count)
	Server          ServerStats       `json:"server"`
}

// Process identifies the process serving the snapshot.
type Process struct {
	PID     int       `json:"pid"`
	UID     uint32    `json:"uid"`
	Comm    string    `json:"comm"`
	Started time.Time `json:"started"` // when the registry was made
}

// Totals are the process's counters over all connections, closed ones
// included.
type Totals struct {
	ConnsOpened      uint64 `json:"conns_opened"`
	ConnsOpen        uint64 `json:"conns_open"`
	Accelerated      uint64 `json:"accelerated"` // connections opened on shm or rdma
	Fallbacks        uint64 `json:"fallbacks"`   // every fallback counted, by any reason
	BytesSent        uint64 `json:"bytes_sent"`
	BytesReceived    uint64 `json:"bytes_received"`
	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
}

// ConnStats is one open connection.
type ConnStats struct {
	ID               uint64     `json:"id"`
	FD               int        `json:"fd"`
	Local            string     `json:"local,omitempty"`
	Peer             string     `json:"peer,omitempty"`
	PeerPID          int        `json:"peer_pid,omitempty"`
	Cookie           uint64     `json:"cookie,omitempty"`
	Channel          uint64     `json:"channel,omitempty"`
	Transport        string     `json:"transport"`
	Reason           int        `json:"reason,omitempty"`
	ReasonName       string     `json:"reason_name,omitempty"`
	Flow             string     `json:"flow,omitempty"`
	Opened           time.Time  `json:"opened"`
	BytesSent        uint64     `json:"bytes_sent"`
	BytesReceived    uint64     `json:"bytes_received"`
	MessagesSent     uint64     `json:"messages_sent"`
	MessagesReceived uint64     `json:"messages_received"`
	Preemptions      uint64     `json:"preemptions"`
	Pauses           uint64     `json:"pauses"`
	Moves            uint64     `json:"cpu_moves"`
	SocketRings      uint64     `json:"socket_rings"` // wakes of the peer's sleepers sent over the socket: a bell this process does not hold
	FlowStats        *FlowStats `json:"flow_stats,omitempty"`
}

// FlowStats is flowcontrol.Stats with its utilisation, for JSON.
type FlowStats struct {
	BlocksSent      uint64  `json:"blocks_sent"`
	BytesSent       uint64  `json:"bytes_sent"`
	CapacitySent    uint64  `json:"capacity_sent"`
	Stalls          uint64  `json:"credit_stalls"`
	CoalescedBytes  uint64  `json:"coalesced_bytes"`
	AsyncFlushes    uint64  `json:"async_flushes"`
	ControlReceived uint64  `json:"control_received"`
	BlocksConsumed  uint64  `json:"blocks_consumed"`
	BytesConsumed   uint64  `json:"bytes_consumed"`
	ControlSent     uint64  `json:"control_sent"`
	Utilisation     float64 `json:"utilisation"`
}

func flowStats(s flowcontrol.Stats) FlowStats {
	return FlowStats{
		BlocksSent: s.BlocksSent, BytesSent: s.BytesSent, CapacitySent: s.CapacitySent,
		Stalls: s.Stalls, CoalescedBytes: s.CoalescedBytes, AsyncFlushes: s.AsyncFlushes,
		ControlReceived: s.ControlReceived, BlocksConsumed: s.BlocksConsumed,
		BytesConsumed: s.BytesConsumed, ControlSent: s.ControlSent, Utilisation: s.Utilisation(),
	}
}

// ChannelSnapshot is one channel: its description and counters.
type ChannelSnapshot struct {
	ChannelInfo
	ChannelStats
}

// WaiterSnapshot is one waiter's counters, wait.WaiterStats for JSON.
type WaiterSnapshot struct {
	Name         string `json:"name"`
	Waits        uint64 `json:"waits"`
	Polls        uint64 `json:"polls"`
	PollHits     uint64 `json:"poll_hits"`
	PollMisses   uint64 `json:"poll_misses"`
	Sleeps       uint64 `json:"sleeps"`
	Yields       uint64 `json:"yields"`
	ModeSwitches uint64 `json:"mode_switches"`
	Budget       int64  `json:"budget"` // -1 busy polling, 0 event mode
}

func waiterSnapshot(name string, s wait.WaiterStats) WaiterSnapshot {
	return WaiterSnapshot{
		Name: name, Waits: s.Waits, Polls: s.Polls, PollHits: s.PollHits, PollMisses: s.Misses(),
		Sleeps: s.Sleeps, Yields: s.Yields, ModeSwitches: s.ModeSwitches, Budget: s.Budget,
	}
}

// SchedulerStats are the scheduler's counters.
type SchedulerStats struct {
	// Preemptions counts scheduling points taken inside large writes
	// (SDPSHIM_PREEMPT), over every connection.
	Preemptions uint64 `json:"preemptions"`
	// Pauses counts the times a stream was held back for its share of a
	// shared channel's blocks while others waited, over every connection.
	Pauses uint64 `json:"pauses"`
	// Moves counts the waits on direct connections that moved their
	// thread off the CPU the peer's thread was on (spreading: both ends
	// of a polling connection on one CPU), over every connection.
	Moves uint64 `json:"cpu_moves"`
}

// ReasonCount is how many connections fell back for one reason.
type ReasonCount struct {
	Code  int    `json:"code"`
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// FallbackEvent is one recent fallback (the last RecentFallbacks kept).
type FallbackEvent struct {
	Time   time.Time `json:"time"`
	Code   int       `json:"code"`
	Name   string    `json:"name"`
	FD     int       `json:"fd"`
	Cookie uint64    `json:"cookie,omitempty"`
	Local  string    `json:"local,omitempty"`
	Peer   string    `json:"peer,omitempty"`
}

// ServerStats are the stats socket's own counters.
type ServerStats struct {
	Served     uint64 `json:"served"`     // snapshots written
	Refused    uint64 `json:"refused"`    // clients refused by SO_PEERCRED
	Overloaded uint64 `json:"overloaded"` // clients dropped: too many at once
}
