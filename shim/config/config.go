package config

import (
	"net/netip"
	"slices"
	"time"
)

// Config is the validated configuration of one process. Load fills every
// field: defaults are resolved ("auto" values computed, the run directory
// and allowed uids derived), so users read fields and never re-parse.
// A Config is a plain value, safe to copy and to share read-only.
type Config struct {
	// Enabled is SDPSHIM_ENABLE; false means the shim intercepts nothing
	// and every connection stays on kernel TCP.
	Enabled bool
	// Provider is SDPSHIM_PROVIDER: which transport may carry streams.
	Provider Provider
	// Flow is SDPSHIM_FLOW: the flow-control algorithm of every stream.
	Flow Flow
	// Transport is SDPSHIM_TRANSPORT: status-byte blocks or the
	// sliding-window baseline.
	Transport Transport
	// Blocks is SDPSHIM_BLOCKS: blocks per channel direction, a power of
	// two.
	Blocks int
	// BlockSize is SDPSHIM_BLOCK_SIZE: bytes per block, header included.
	BlockSize int
	// Credits is SDPSHIM_CREDITS resolved: blocks one stream may hold under
	// credit flow control, 1..Blocks.
	Credits int
	// VirtualWindow is SDPSHIM_VWINDOW resolved: bytes one posted receive
	// guarantees under nicassist flow control, at most ChannelBytes().
	VirtualWindow int
	// Poll is SDPSHIM_POLL: how waiters spend time before sleeping.
	Poll PollMode
	// PollMin and PollMax (SDPSHIM_POLL_MIN, SDPSHIM_POLL_MAX) clamp the
	// adaptive poll budget, in polls; PollMin <= PollMax.
	PollMin, PollMax int
	// PollAlpha (> 1) multiplies the budget when traffic rises, PollBeta
	// (0 < beta < 1) scales it when traffic falls.
	PollAlpha, PollBeta float64
	// PollDelta is the traffic slope threshold, in events per period: a
	// change smaller than this counts as steady.
	PollDelta float64
	// PollPeriod is how often the adaptive budget is recomputed.
	PollPeriod time.Duration
	// PollSpin is the hybrid mode's fixed number of polls before sleeping.
	PollSpin int
	// Channel is SDPSHIM_CHANNEL: one channel per process pair, or one per
	// connection (the multi-QP baseline).
	Channel ChannelMode
	// Preempt is SDPSHIM_PREEMPT: whether large writes are cut into
	// sub-writes with scheduling points between them.
	Preempt bool
	// PreemptChunk is the sub-write size in bytes when Preempt is set
	// (BlockSize unless SDPSHIM_PREEMPT gave a size), 0 otherwise.
	PreemptChunk int
	// Rules is SDPSHIM_INCLUDE and SDPSHIM_EXCLUDE: which remote endpoints
	// may be accelerated.
	Rules RuleSet
	// Services is SDPSHIM_SERVICES: destinations a NAT may forward to
	// another network namespace of this host (a Kubernetes service
	// range). Empty by default.
	Services Rules
	// RunDir is SDPSHIM_RUNDIR, or the derived default: where listeners
	// register and stats sockets live. Not created by Load.
	RunDir string
	// AllowUIDs is SDPSHIM_ALLOW_UIDS plus the process's own uid, sorted,
	// without duplicates: the peers (by SO_PEERCRED) a rendezvous or a
	// stats client may come from.
	AllowUIDs []uint32
	// LogLevel is SDPSHIM_LOG_LEVEL; LogOff means silent.
	LogLevel LogLevel
	// LogFile is SDPSHIM_LOG_FILE: an absolute path, or "" for stderr.
	LogFile string
	// CorePath is SDPSHIM_CORE: the Go core library the interposer loads,
	// or "" for the one beside libsdpshim.so. The C interposer reads the
	// variable itself; it is here so that it is validated and documented
	// with every other knob.
	CorePath string
	// Stats is SDPSHIM_STATS: whether the process serves its stats socket.
	Stats bool
	// ShortConn is SDPSHIM_SHORT_CONN: whether connections to a destination
	// whose recent accelerated connections were short-lived stay on kernel
	// TCP (shim/shortconn.go).
	ShortConn bool
}

// ChannelBytes returns the size of one channel direction:
// Blocks * BlockSize.
func (c Config) ChannelBytes() int { return c.Blocks * c.BlockSize }

// Eligible reports whether a connection to ip:port may be accelerated
// according to SDPSHIM_INCLUDE and SDPSHIM_EXCLUDE (exclude wins).
func (c Config) Eligible(ip netip.Addr, port uint16) bool {
	return c.Rules.Match(ip, port)
}

// AllowsUID reports whether a peer running as uid may rendezvous with
// this process or read its stats.
func (c Config) AllowsUID(uid uint32) bool {
	_, found := slices.BinarySearch(c.AllowUIDs, uid)
	return found
}

// Provider selects the transport that may carry accelerated streams.
type Provider string

// Providers.
const (
	// ProviderAuto uses shared memory on one host and RDMA between hosts
	// when a device and route exist.
	ProviderAuto Provider = "auto"
	// ProviderSHM accelerates same-host connections only.
	ProviderSHM Provider = "shm"
	// ProviderRDMA accelerates connections over RDMA only.
	ProviderRDMA Provider = "rdma"
	// ProviderTCP accelerates nothing but keeps interception, stats and
	// fallback reasons: a baseline with the shim's overhead.
	ProviderTCP Provider = "tcp"
)

// Flow selects the flow-control algorithm (seed 001).
type Flow string

// Flow-control algorithms.
const (
	FlowCredit    Flow = "credit"    // one send per block, credits returned
	FlowPacked    Flow = "packed"    // sends packed into blocks, coalescing
	FlowNICAssist Flow = "nicassist" // packed + virtual windows + async flush
)

// Transport selects the block transport (seed 000).
type Transport string

// Transports.
const (
	TransportStatusByte    Transport = "statusbyte"
	TransportSlidingWindow Transport = "slidingwindow"
)

// PollMode selects the waiter's policy (seed 002).
type PollMode string

// Poll modes.
const (
	PollAdaptive PollMode = "adaptive" // traffic-driven budget
	PollBusy     PollMode = "busy"     // poll until ready
	PollEvent    PollMode = "event"    // sleep at once
	PollHybrid   PollMode = "hybrid"   // fixed spin, then sleep
)

// ChannelMode selects how connections map to channels.
type ChannelMode string

// Channel modes.
const (
	ChannelShared        ChannelMode = "shared"
	ChannelPerConnection ChannelMode = "per-connection"
	// ChannelDirect: one direct area per connection, its bytes moved by
	// the program's own threads (core/direct, docs/direct.md).
	ChannelDirect ChannelMode = "direct"
)

// LogLevel is SDPSHIM_LOG_LEVEL: "off" or a logrus level name.
type LogLevel string

// Log levels, from silent to most verbose.
const (
	LogOff   LogLevel = "off"
	LogPanic LogLevel = "panic"
	LogFatal LogLevel = "fatal"
	LogError LogLevel = "error"
	LogWarn  LogLevel = "warn"
	LogInfo  LogLevel = "info"
	LogDebug LogLevel = "debug"
	LogTrace LogLevel = "trace"
)
