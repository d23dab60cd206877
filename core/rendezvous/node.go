package rendezvous

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for Config's zero values.
const (
	DefaultOfferTimeout   = 200 * time.Millisecond
	DefaultPendingTimeout = 3 * time.Second
	DefaultReadTimeout    = time.Second
	DefaultMaxConns       = 64
	DefaultMaxPending     = 4096
)

// Config configures a Node. RunDir is required; zero values of the rest
// take the defaults.
type Config struct {
	// RunDir is the per-user run directory (resolved by shim/config): an
	// absolute, clean path short enough for socket names in it.
	RunDir string
	// AllowUIDs are the uids (SO_PEERCRED) this process rendezvouses
	// with, in both directions. Empty means only the effective uid.
	AllowUIDs []uint32
	// Handler answers offers; Register fails without one.
	Handler Handler
	// OnDrop, if set, is called once for every accepted offer that is not
	// claimed, so the caller can release Match.Prepared. It runs on the
	// goroutine that drops the entry (a timer, the server, Claim's or
	// Close's caller) with no lock held.
	OnDrop func(Match, DropCause)
	// OnPending, if set, is told how many offers this process may hold
	// unclaimed (held.go) whenever that changes, one call at a time, the
	// last with the latest count: before the answer of a new one goes
	// out, after one is claimed or dropped, and before the server takes
	// a rendezvous connection off its socket. It must not block.
	OnPending func(n int)
	// OnPull, if set, answers PULLs for the connections this process
	// deferred (Defer; pull.go); without it every PULL is refused.
	OnPull PullHandler
	// PullHere says that OnPull makes its offer on the PULL's own
	// connection only (PullRequest.OfferHere) and waits on no rendezvous
	// server: the accept loop then serves a PULL itself (servePulls).
	// An OnPull that offers to the puller's server must leave it false:
	// that server may be this one, or one whose accept loop serves a PULL
	// of this process's meanwhile.
	PullHere bool
	// OfferTimeout bounds an Offer whose context has no deadline.
	OfferTimeout time.Duration
	// PendingTimeout is how long an accepted offer waits for its Claim.
	PendingTimeout time.Duration
	// ReadTimeout bounds how long the server waits for a request's bytes
	// and for its answer to be written.
	ReadTimeout time.Duration
	// MaxConns bounds concurrent rendezvous connections being served;
	// MaxPending bounds accepted offers waiting for their Claim.
	MaxConns, MaxPending int
}

// Node is one process's rendezvous: its registrations in the run
// directory, its server (started by the first Register), its pending
// table, and the connector side (Lookup, Offer). Methods are safe for
// concurrent use. A Node must not be used in a fork child.
type Node struct {
	cfg   Config
	pid   int
	start uint64
	euid  uint32
	pidns string // namespace.go
	netns string
	nsID  uint64 // pidns's inode, in entry names
	// sweeper: removes every uid's leftovers, not only its own (Sweep).
	sweeper bool
	stats   counters
	pend    pendingTable
	lookups lookupCache  // Lookup's answers (lookupcache.go)
	quiet   quietCache   // Quiet's last listing (quiet.go)
	pending pendingSeen  // awaitBound's last listing (unboundrec.go)
	answers atomic.Int32 // Answers not closed yet: each holds an fd (fdshare.go)
	runDir  dirCache     // the run directory, kept open (dircache.go)
	recDir  dirCache     // its record directory, the same
	held    heldCount    // what OnPending is told (held.go)

	mu     sync.Mutex
	closed bool
	srv    *server                           // nil until the first Register
	regs   map[uint16]map[netip.AddrPort]int // port -> listen address -> count
	groups map[uint16]bool                   // ports registered as group listeners
	recs   map[string]bool                   // deferred records this Node wrote (deferred.go)
}

// ownPID is this process's pid, for the frames it sends (a fork child
// never runs this copy of the core: it loads one of its own).
var ownPID = uint32(os.Getpid())

// New checks cfg and returns a Node. It touches nothing on disk: the run
// directory is created by the first Register.
func New(cfg Config) (*Node, error) {
	if !filepath.IsAbs(cfg.RunDir) || filepath.Clean(cfg.RunDir) != cfg.RunDir {
		return nil, &FallbackError{ReasonRunDir, fmt.Errorf("run directory %q: not a clean absolute path", cfg.RunDir)}
	}
	// A socket name is at most 27 bytes (p + 10-digit pid + - + 8 + .sock).
	if len(cfg.RunDir)+1+27 > maxSockPath {
		return nil, &FallbackError{ReasonRunDir, fmt.Errorf("run directory %q: too long for socket paths", cfg.RunDir)}
	}
	if cfg.OfferTimeout < 0 || cfg.PendingTimeout < 0 || cfg.ReadTimeout < 0 || cfg.MaxConns < 0 || cfg.MaxPending < 0 {
		return nil, fmt.Errorf("rendezvous: negative limit in config")
	}
	cfg.OfferTimeout = orDefault(cfg.OfferTimeout, DefaultOfferTimeout)
	cfg.PendingTimeout = orDefault(cfg.PendingTimeout, DefaultPendingTimeout)
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.MaxConns = orDefault(cfg.MaxConns, DefaultMaxConns)
	cfg.MaxPending = orDefault(cfg.MaxPending, DefaultMaxPending)
	euid := uint32(unix.Geteuid())
	if len(cfg.AllowUIDs) == 0 {
		cfg.AllowUIDs = []uint32{euid}
	}
	cfg.AllowUIDs = slices.Compact(slices.Sorted(slices.Values(cfg.AllowUIDs)))
	pid := unix.Getpid()
	st, start := processStart(pid)
	if st != procAlive {
		return nil, &FallbackError{ReasonRunDir, fmt.Errorf("rendezvous: cannot read /proc/%d/stat", pid)}
	}
	pidns := namespaceOf("pid")
	n := &Node{cfg: cfg, pid: pid, start: start, euid: euid, pidns: pidns, netns: namespaceOf("net"), nsID: namespaceID(pidns),
		regs: map[uint16]map[netip.AddrPort]int{}, groups: map[uint16]bool{}, recs: map[string]bool{}}
	n.pend.init(n)
	return n, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (n *Node) allowed(uid uint32) bool {
	_, ok := slices.BinarySearch(n.cfg.AllowUIDs, uid)
	return ok
}

// Stats returns a snapshot of the Node's counters.
func (n *Node) Stats() Stats { return n.stats.snapshot() }

// Close removes the Node's entry files and socket, stops the server
// (waiting for running Handlers to return) and drops every pending entry
// (OnDrop with DropClosed). Later calls of any method fail with ErrClosed
// (Claim reports no match). Close is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	srv := n.srv
	var err error
	if len(n.regs) > 0 {
		err = n.withRunDir(false, func(dirfd int) error {
			for port := range n.regs {
				unix.Unlinkat(dirfd, n.entryName(port), 0)
			}
			return nil
		})
	}
	if len(n.recs) > 0 {
		n.withRecordDir(false, func(dirfd int) error {
			for name := range n.recs {
				unix.Unlinkat(dirfd, name, 0)
			}
			return nil
		})
	}
	n.regs, n.recs = nil, nil
	n.mu.Unlock()
	if srv != nil {
		srv.stop()
	}
	n.pend.closeAll()
	n.recDir.close()
	n.runDir.close()
	return err
}

// withRunDir runs f with the checked run directory open (kept open
// between uses: dircache.go).
func (n *Node) withRunDir(create bool, f func(dirfd int) error) error {
	return n.runDir.use(n.cfg.RunDir, func() (int, error) { return openRunDir(n.cfg.RunDir, create) }, f)
}
