package seed000

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sdpshim/sdpshim/bench/internal/childproc"
)

// peerEnv carries the job of a child process (JSON); its absence means
// this process is not a peer.
const peerEnv = "SDPSHIM_SEED000_PEER"

// peerProfileEnv, when set in the parent's environment, names a file
// the child writes its CPU profile to (go tool pprof), the child's PID
// appended: the receiving side's view of a benchmark.
const peerProfileEnv = "SDPSHIM_SEED000_PEER_CPUPROFILE"

// peerFD is the child's end of the setup socket.
const peerFD = childproc.FD

// job is what the parent asks the child to do; which fields matter
// depends on Role.
type job struct {
	Role  string
	Link  LinkConfig
	Wait  string // stream-level roles: the channel's wait mode
	Procs int    // GOMAXPROCS of the child (0: the default)
	Iters int    // syncRecv: synchronisations
	Start int64  // camera: the parent's start, monoNow
	// retainRecv: run for Run ns from the first block; hold the first
	// block that lands in slot Slot at or after From ns until To ns.
	Run, From, To int64
	Slot          int
	Bin           int64 // retainRecv, camera: bin width in ns
	Streams       int   // camera: streams to accept
	Frame         int   // camera: bytes per frame
}

// report is the child's answer, on its stdout.
type report struct {
	Err   string  `json:",omitempty"`
	Times []int64 `json:",omitempty"` // syncRecv: release times (monoNow)
	Bins  []int64 `json:",omitempty"` // payload bytes per bin
	Lat   []int64 `json:",omitempty"` // camera: frame delivery latencies, ns
	CPU   int64   // CPU time of the child's measured part, ns
}

// roles are the child's sides of the experiments, keyed by job.Role.
var roles = map[string]func(j job, l *link) (report, error){}

// ServePeer makes this process the child side of an experiment when its
// environment names one: it runs it, writes the report to stdout and
// exits. Otherwise it returns at once. A program that runs Run must call
// it first thing (sdpshim from an init function, the tests from TestMain).
func ServePeer() {
	spec := os.Getenv(peerEnv)
	if spec == "" {
		return
	}
	os.Exit(servePeer(spec))
}

func servePeer(spec string) int {
	var j job
	rep, err := func() (report, error) {
		if err := json.Unmarshal([]byte(spec), &j); err != nil {
			return report{}, fmt.Errorf("job: %w", err)
		}
		role, ok := roles[j.Role]
		if !ok {
			return report{}, fmt.Errorf("unknown role %q", j.Role)
		}
		setProcs(j.Procs)
		if path := os.Getenv(peerProfileEnv); path != "" {
			if f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil {
				if pprof.StartCPUProfile(f) == nil {
					defer pprof.StopCPUProfile()
				}
			}
		}
		l, err := openLink(peerFD, j.Link)
		unix.Close(peerFD)
		if err != nil {
			return report{}, err
		}
		defer l.close()
		return role(j, l)
	}()
	if err != nil {
		rep.Err = fmt.Sprintf("%s peer: %v", j.Role, err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "seed000 peer:", err)
		return 2
	}
	return 0
}

// peerProc is a running child (bench/internal/childproc).
type peerProc struct{ p *childproc.Proc }

// startPeer starts a child for j and connects this side's end of the
// transport to it.
func startPeer(j job) (*peerProc, *link, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, err
	}
	p, fd, err := childproc.Start(peerEnv, string(spec))
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	pp := &peerProc{p: p}
	l, err := openLink(fd, j.Link)
	if err != nil {
		pp.kill()
		return nil, nil, fmt.Errorf("%s: %w (peer: %s)", j.Link.Transport, err, p.Stderr())
	}
	return pp, l, nil
}

// finish waits up to timeout for the child to exit and returns its
// report; on timeout it kills the child.
func (pp *peerProc) finish(timeout time.Duration) (report, error) {
	var rep report
	if err := pp.p.Finish(timeout, &rep); err != nil {
		return rep, fmt.Errorf("peer: %w", err)
	}
	if rep.Err != "" {
		return rep, fmt.Errorf("%s", rep.Err)
	}
	return rep, nil
}

// kill ends the child and waits for it.
func (pp *peerProc) kill() { pp.p.Kill() }
