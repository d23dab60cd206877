package probes

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
)

// Verdict is what a report says of one kernel-TCP connection.
type Verdict int

// Verdicts, least to most worth a look.
const (
	// VerdictRemote: kernel TCP to another host; nothing to say.
	VerdictRemote Verdict = iota
	// VerdictAccelerated: reported accelerated, and kernel TCP carried no
	// payload since.
	VerdictAccelerated
	// VerdictFallback: a shimmed process reported a fallback for it.
	VerdictFallback
	// VerdictCandidate: local TCP where one end or both do not run the
	// shim: running both under it would accelerate it.
	VerdictCandidate
	// VerdictSilentFallback: reported accelerated, yet kernel TCP still
	// carries its payload.
	VerdictSilentFallback
)

func (v Verdict) String() string {
	return [...]string{"remote", "accelerated", "fallback", "candidate", "SILENT-FALLBACK"}[v]
}

// Facts are what a report knows beyond the maps.
type Facts struct {
	Accelerated map[uint64]bool // socket cookies reported accelerated
	Fallbacks   map[uint64]int  // socket cookie -> reason code reported
	// Shimmed reports whether a process runs the shim (ShimmedPID).
	Shimmed func(pid uint32) bool
	// IsLocal reports whether an address is this host's (LocalAddrs).
	IsLocal func(netip.Addr) bool
}

// Row is one (pid, socket) with kernel-TCP bytes, judged.
type Row struct {
	ConnBytes
	State                int    // last TCP state seen, 0 when none
	OnHost               bool   // the remote end is on this host
	PeerPID              uint32 // the process at the other end, 0 when unseen
	PeerComm             string
	Shimmed, PeerShimmed bool
	Reason               int // fallback code, for VerdictFallback
	Verdict              Verdict
}

// Classify judges every connection: silent fallbacks first, then
// candidates, fallbacks, accelerated, remote; by pid within each.
func Classify(conns []ConnBytes, states []SockState, f Facts) []Row {
	state := make(map[uint64]int, len(states))
	for _, s := range states {
		state[s.Cookie] = s.State
	}
	byTuple := make(map[Tuple]int, len(conns))
	for i, c := range conns {
		byTuple[c.Tuple] = i
	}
	rows := make([]Row, 0, len(conns))
	for _, c := range conns {
		r := Row{ConnBytes: c, State: state[c.Cookie], Shimmed: f.Shimmed(c.PID)}
		r.OnHost = f.IsLocal(c.Remote.Addr())
		if i, ok := byTuple[Tuple{Local: c.Remote, Remote: c.Local}]; ok {
			r.PeerPID, r.PeerComm = conns[i].PID, conns[i].Comm
			r.PeerShimmed = f.Shimmed(r.PeerPID)
		}
		reason, fellBack := f.Fallbacks[c.Cookie]
		switch {
		case f.Accelerated[c.Cookie] && c.SentAccel+c.ReceivedAccel > 0:
			r.Verdict = VerdictSilentFallback
		case f.Accelerated[c.Cookie]:
			r.Verdict = VerdictAccelerated
		case fellBack:
			r.Verdict, r.Reason = VerdictFallback, reason
		case r.OnHost && !(r.Shimmed && r.PeerShimmed):
			r.Verdict = VerdictCandidate
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if a.Verdict != b.Verdict {
			return int(b.Verdict) - int(a.Verdict)
		}
		if a.PID != b.PID {
			return int(a.PID) - int(b.PID)
		}
		return a.Tuple.Local.Compare(b.Tuple.Local)
	})
	return rows
}

// ShimmedPID reports whether process pid has the sdpshim interposer or
// core library mapped (false when it is gone or unreadable).
func ShimmedPID(pid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/maps")
	return err == nil && bytes.Contains(b, []byte("/libsdpshim"))
}

// LocalAddrs returns an IsLocal for this host's addresses now: loopback,
// and every address of every interface.
func LocalAddrs() func(netip.Addr) bool {
	local := map[netip.Addr]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr().Unmap()] = true
			}
		}
	}
	return func(a netip.Addr) bool {
		a = a.Unmap()
		return a.IsLoopback() || local[a]
	}
}
