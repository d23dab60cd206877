package config

import (
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Limits of the numeric knobs.
const (
	minBlocks       = 2
	maxBlocks       = 4096
	minBlockSize    = 256
	maxBlockSize    = 1 << 20
	blockAlign      = 64 // block starts stay cache-line aligned
	maxChannelBytes = 1 << 30
	maxPolls        = 1_000_000
	maxAlpha        = 16
	minPollPeriod   = 10 * time.Microsecond
	maxPollPeriod   = 10 * time.Second
)

const (
	expectBool  = "1 or 0 (also true/false, yes/no, on/off)"
	expectRules = "comma-separated ADDR:PORT rules (ADDR: IPv4, [IPv6], CIDR prefix or *; PORT: N, N-M or *, may be left out)"
)

// knobs is the table of every SDPSHIM_* variable. Order matters: Load
// parses in this order and documentation lists it so.
var knobs = []Knob{
	{
		Name: "SDPSHIM_ENABLE", Default: "1", Expected: expectBool,
		Meaning: "0 turns the shim off: every connection stays on kernel TCP",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Enabled)(parseBool(v))
		},
	},
	{
		Name: "SDPSHIM_PROVIDER", Default: "auto", Expected: "auto, shm, rdma or tcp",
		Meaning: "transport for accelerated streams; auto = shared memory on one host, RDMA between hosts; tcp = accelerate nothing",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Provider)(parseEnum(v, ProviderAuto, ProviderSHM, ProviderRDMA, ProviderTCP))
		},
	},
	{
		Name: "SDPSHIM_FLOW", Default: "packed", Expected: "credit, packed or nicassist",
		Meaning: "flow control: one send per block with credits, sends packed into blocks, or packed with NIC-assisted virtual windows",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Flow)(parseEnum(v, FlowCredit, FlowPacked, FlowNICAssist))
		},
	},
	{
		Name: "SDPSHIM_TRANSPORT", Default: "statusbyte", Expected: "statusbyte or slidingwindow",
		Meaning: "block transport: status-byte blocks with a stateless receiver, or the sliding-window baseline",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Transport)(parseEnum(v, TransportStatusByte, TransportSlidingWindow))
		},
	},
	{
		Name: "SDPSHIM_BLOCKS", Default: "auto",
		DefaultText: "auto (the direct path: enough to hold the kernel's largest TCP send buffer, net.ipv4.tcp_wmem, from 64 to 1024: 256 at its usual 4 MiB; the channel modes: 64)",
		Expected:    "auto or a power of two from 2 to 4096",
		Meaning:     "blocks per direction of a connection's area (of the channel, in the channel modes): how far a writer may get ahead of its reader",
		set: func(c *Config, v string, _ *loader) error {
			if strings.EqualFold(v, "auto") {
				c.Blocks = 0 // resolved once the channel mode is known
				return nil
			}
			n, err := parseInt(v, minBlocks, maxBlocks)
			if err == nil && !isPowerOfTwo(n) {
				err = errBad
			}
			return store(&c.Blocks)(n, err)
		},
	},
	{
		Name: "SDPSHIM_BLOCK_SIZE", Default: "16K",
		Expected: "a byte size from 256 to 1M, a multiple of 64 (K, M suffixes are binary)",
		Meaning:  "bytes per block, header included (on the direct path: payload bytes, the header beside them, below 1M); a channel direction takes SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE, at most 1G",
		set: func(c *Config, v string, _ *loader) error {
			n, err := parseSize(v, minBlockSize, maxBlockSize)
			if err == nil && n%blockAlign != 0 {
				err = errBad
			}
			return store(&c.BlockSize)(n, err)
		},
	},
	{
		Name: "SDPSHIM_CREDITS", Default: "auto", DefaultText: "auto (SDPSHIM_BLOCKS/4)",
		Expected: "auto or a block count from 1 to SDPSHIM_BLOCKS",
		Meaning:  "credit flow control: blocks one stream may hold before it waits for credits",
		set: func(c *Config, v string, _ *loader) error {
			if strings.EqualFold(v, "auto") {
				c.Credits = 0 // resolved once Blocks is known
				return nil
			}
			return store(&c.Credits)(parseInt(v, 1, maxBlocks))
		},
	},
	{
		Name: "SDPSHIM_VWINDOW", Default: "auto", DefaultText: "auto (a quarter of the channel)",
		Expected: "auto or a byte size from 256 to SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE",
		Meaning:  "nicassist flow control: bytes each posted receive guarantees; sends are cut to this size",
		set: func(c *Config, v string, _ *loader) error {
			if strings.EqualFold(v, "auto") {
				c.VirtualWindow = 0 // resolved once the channel size is known
				return nil
			}
			return store(&c.VirtualWindow)(parseSize(v, minBlockSize, maxChannelBytes))
		},
	},
	{
		Name: "SDPSHIM_POLL", Default: "adaptive", Expected: "adaptive, busy, event or hybrid",
		Meaning: "how a waiter spends time before sleeping: traffic-adaptive budget, spin, sleep at once, or fixed spin then sleep",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Poll)(parseEnum(v, PollAdaptive, PollBusy, PollEvent, PollHybrid))
		},
	},
	{
		Name: "SDPSHIM_POLL_MIN", Default: "16", Expected: "a poll count from 0 to 1000000, at most SDPSHIM_POLL_MAX",
		Meaning: "adaptive polling: smallest poll budget",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollMin)(parseInt(v, 0, maxPolls))
		},
	},
	{
		Name: "SDPSHIM_POLL_MAX", Default: "4096", Expected: "a poll count from 1 to 1000000, at least SDPSHIM_POLL_MIN",
		Meaning: "adaptive polling: largest poll budget, also granted to the wait after a wakeup (request/response keeps polling)",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollMax)(parseInt(v, 1, maxPolls))
		},
	},
	{
		Name: "SDPSHIM_POLL_ALPHA", Default: "2", Expected: "a number above 1, at most 16",
		Meaning: "adaptive polling: factor applied to the budget when traffic rises (and to the polls of a late hit)",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollAlpha)(parseFloat(v, func(f float64) bool { return f > 1 && f <= maxAlpha }))
		},
	},
	{
		Name: "SDPSHIM_POLL_BETA", Default: "0.5", Expected: "a number above 0 and below 1",
		Meaning: "adaptive polling: factor applied to the budget when traffic falls or a wait polls in vain",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollBeta)(parseFloat(v, func(f float64) bool { return f > 0 && f < 1 }))
		},
	},
	{
		Name: "SDPSHIM_POLL_DELTA", Default: "16", Expected: "a number from 0 to 1000000",
		Meaning: "adaptive polling: traffic slope threshold, in events per period, below which traffic counts as steady",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollDelta)(parseFloat(v, func(f float64) bool { return f >= 0 && f <= maxPolls }))
		},
	},
	{
		Name: "SDPSHIM_POLL_PERIOD", Default: "1ms", Expected: "a duration from 10us to 10s, e.g. 500us or 2ms",
		Meaning: "adaptive polling: how often the budget is recomputed from traffic",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollPeriod)(parseDuration(v, minPollPeriod, maxPollPeriod))
		},
	},
	{
		Name: "SDPSHIM_POLL_SPIN", Default: "256", Expected: "a poll count from 0 to 1000000",
		Meaning: "hybrid polling: fixed number of polls before sleeping",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.PollSpin)(parseInt(v, 0, maxPolls))
		},
	},
	{
		Name: "SDPSHIM_CHANNEL", Default: "direct", Expected: "shared, per-connection or direct",
		Meaning: "one channel per pair of processes, one per connection (the multi-QP baseline), or the direct path (one area per connection, moved by the program's threads)",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Channel)(parseEnum(v, ChannelShared, ChannelPerConnection, ChannelDirect))
		},
	},
	{
		Name: "SDPSHIM_PREEMPT", Default: "1",
		Expected: "1 or 0 (also true/false, yes/no, on/off), or a sub-write byte size from SDPSHIM_BLOCK_SIZE to SDPSHIM_BLOCKS*SDPSHIM_BLOCK_SIZE",
		Meaning:  "cut large writes into sub-writes (one block each, or the size given) so small messages get their turn; large blocking writes pause while small messages of the process, or of the user's other processes, lose the CPU (docs/direct.md, Preemption), and on the direct path take turns with the large writes of the user's other processes (docs/direct.md, Tenants)",
		set: func(c *Config, v string, _ *loader) error {
			if on, err := parseBool(v); err == nil {
				c.Preempt, c.PreemptChunk = on, 0 // chunk resolved to BlockSize
				return nil
			}
			n, err := parseSize(v, minBlockSize, maxChannelBytes)
			if err == nil {
				c.Preempt, c.PreemptChunk = true, n
			}
			return err
		},
	},
	{
		Name: "SDPSHIM_INCLUDE", Default: "*:*", Expected: expectRules,
		Meaning: "remote endpoints that may be accelerated, e.g. 127.0.0.1:6379,[::1]:*,10.0.0.0/8:8000-8100",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Rules.Include)(ParseRules(v))
		},
	},
	{
		Name: "SDPSHIM_EXCLUDE", Default: "", Expected: expectRules,
		Meaning: "remote endpoints never accelerated; wins over SDPSHIM_INCLUDE",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Rules.Exclude)(ParseRules(v))
		},
	},
	{
		Name: "SDPSHIM_SERVICES", Default: "", Expected: expectRules,
		Meaning: "destinations that a NAT on this host may forward to another network namespace, e.g. a Kubernetes service range " +
			"10.96.0.0/12; a connection to one is matched by its source address, the acceptor claiming it (docs/kubernetes.md)",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Services)(ParseRules(v))
		},
	},
	{
		Name: "SDPSHIM_RUNDIR", DefaultText: "$XDG_RUNTIME_DIR/sdpshim",
		Expected: "an absolute path of at most 80 bytes",
		Meaning: "directory of listener registrations and stats sockets, created 0700 (or shared: mode 3770, docs/kubernetes.md); both ends must use the same one; " +
			"default /run/sdpshim for root, else $XDG_RUNTIME_DIR/sdpshim when set, else /tmp/sdpshim-UID",
		set: func(c *Config, v string, l *loader) error {
			if v == "" {
				c.RunDir = defaultRunDir(l.uid, l.lookup)
				return nil
			}
			return store(&c.RunDir)(checkRunDir(v))
		},
	},
	{
		Name: "SDPSHIM_ALLOW_UIDS", DefaultText: "own uid",
		Expected: "comma-separated uids from 0 to 4294967294",
		Meaning:  "uids (SO_PEERCRED) allowed to rendezvous with this process or read its stats; own uid always is",
		set: func(c *Config, v string, l *loader) error {
			uids := []uint32{}
			if v != "" {
				var err error
				if uids, err = parseUIDs(v); err != nil {
					return err
				}
			}
			uids = append(uids, uint32(l.uid))
			slices.Sort(uids)
			c.AllowUIDs = slices.Compact(uids)
			return nil
		},
	},
	{
		Name: "SDPSHIM_LOG_LEVEL", Default: "off",
		Expected: "off, panic, fatal, error, warn, info, debug or trace",
		Meaning:  "log verbosity; off is silent",
		set: func(c *Config, v string, _ *loader) error {
			if strings.EqualFold(v, "warning") {
				v = string(LogWarn)
			}
			return store(&c.LogLevel)(parseEnum(v, LogOff, LogPanic, LogFatal, LogError, LogWarn, LogInfo, LogDebug, LogTrace))
		},
	},
	{
		Name: "SDPSHIM_LOG_FILE", Default: "stderr", Expected: "stderr or an absolute file path",
		Meaning: "where logs go when SDPSHIM_LOG_LEVEL is not off; a file is opened for append (created 0600)",
		set: func(c *Config, v string, _ *loader) error {
			switch {
			case strings.EqualFold(v, "stderr"):
				c.LogFile = ""
			case filepath.IsAbs(v):
				c.LogFile = filepath.Clean(v)
			default:
				return errBad
			}
			return nil
		},
	},
	{
		Name: "SDPSHIM_CORE", DefaultText: "libsdpshim-core.so beside libsdpshim.so",
		Expected: "an absolute path of the Go core library",
		Meaning:  "the core the interposer loads on the first TCP socket (read by the C interposer; ignored in setuid programs)",
		set: func(c *Config, v string, _ *loader) error {
			if v == "" {
				return nil
			}
			if !filepath.IsAbs(v) {
				return errBad
			}
			c.CorePath = filepath.Clean(v)
			return nil
		},
	},
	{
		Name: "SDPSHIM_STATS", Default: "1", Expected: expectBool,
		Meaning: "serve per-process stats on a unix socket in the run directory (for sdpshim stats)",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.Stats)(parseBool(v))
		},
	},
	{
		Name: "SDPSHIM_SHORT_CONN", Default: "1", Expected: expectBool,
		Meaning: "keep connections to a destination on kernel TCP (reason short-lived) while most recent accelerated ones there closed within ten times their setup time; one is tried again now and then",
		set: func(c *Config, v string, _ *loader) error {
			return store(&c.ShortConn)(parseBool(v))
		},
	},
}
