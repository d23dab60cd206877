package seed000

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"time"

	"golang.org/x/sys/unix"
)

// peerEnv carries the job of a child process (JSON); its absence means
// this process is not a peer.
const peerEnv = "SDPSHIM_SEED000_PEER"

// peerProfileEnv, when set in the parent's environment, names a file
// the child writes its CPU profile to (go tool pprof), the child's PID
// appended: the receiving side's view of a benchmark.
const peerProfileEnv = "SDPSHIM_SEED000_PEER_CPUPROFILE"

// peerFD is the child's end of the setup socket.
const peerFD = 3

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

// peerProc is a running child.
type peerProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errs bytes.Buffer
	done chan error
}

// startPeer starts a child for j and connects this side's end of the
// transport to it.
func startPeer(j job) (*peerProc, *link, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	defer unix.Close(fds[0])
	child := os.NewFile(uintptr(fds[1]), "seed000-setup")
	pp := &peerProc{cmd: exec.Command(exe), done: make(chan error, 1)}
	pp.cmd.Env = append(os.Environ(), peerEnv+"="+string(spec))
	pp.cmd.ExtraFiles = []*os.File{child}
	pp.cmd.Stdout, pp.cmd.Stderr = &pp.out, &pp.errs
	err = pp.cmd.Start()
	child.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("start peer: %w", err)
	}
	go func() { pp.done <- pp.cmd.Wait() }()
	l, err := openLink(fds[0], j.Link)
	if err != nil {
		pp.kill()
		return nil, nil, fmt.Errorf("%s: %w (peer: %s)", j.Link.Transport, err, bytes.TrimSpace(pp.errs.Bytes()))
	}
	return pp, l, nil
}

// finish waits up to timeout for the child to exit and returns its
// report; on timeout it kills the child.
func (pp *peerProc) finish(timeout time.Duration) (report, error) {
	var rep report
	select {
	case err := <-pp.done:
		if err != nil {
			return rep, fmt.Errorf("peer: %v: %s", err, bytes.TrimSpace(pp.errs.Bytes()))
		}
	case <-time.After(timeout):
		pp.kill()
		return rep, fmt.Errorf("peer did not finish in %v", timeout)
	}
	if err := json.Unmarshal(pp.out.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("peer report: %v (%q)", err, pp.out.String())
	}
	if rep.Err != "" {
		return rep, fmt.Errorf("%s", rep.Err)
	}
	return rep, nil
}

// kill ends the child and waits for it.
func (pp *peerProc) kill() {
	pp.cmd.Process.Kill()
	<-pp.done
}
