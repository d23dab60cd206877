package soak

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sdpshim/sdpshim/bench/internal/cbuild"
	"github.com/sdpshim/sdpshim/bench/programs"
)

//go:embed csrc/soak.c
var soakC []byte

// build compiles soak.c in dir and returns the program. The source goes
// where it lies in the repository, the header it includes by path beside
// it (programs.ForkHold).
func build(dir string) (string, error) {
	const src = "bench/soak/csrc/soak.c"
	return cbuild.Build(dir, src, map[string][]byte{
		src:                              soakC,
		"bench/programs/csrc/forkhold.h": programs.ForkHold, // as its #include finds it
	}, "-pthread")
}

// report is what a soak process prints when it ends (csrc/soak.c).
type report struct {
	Conns      uint64 `json:"conns"`
	Completed  uint64 `json:"completed"`
	BytesOut   uint64 `json:"bytes_out"`
	BytesIn    uint64 `json:"bytes_in"`
	Mismatches uint64 `json:"mismatches"`
	Hangs      uint64 `json:"hangs"`
	Errors     uint64 `json:"errors"`
	Stuck      uint64 `json:"stuck"` // a client's hung connections that never returned
}

// add adds r's counts to t.
func (t *report) add(r report) {
	t.Conns += r.Conns
	t.Completed += r.Completed
	t.BytesOut += r.BytesOut
	t.BytesIn += r.BytesIn
	t.Mismatches += r.Mismatches
	t.Hangs += r.Hangs
	t.Errors += r.Errors
	t.Stuck += r.Stuck
}

// parseReport decodes the last line of a soak process's output.
func parseReport(out string) (report, error) {
	var r report
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return r, fmt.Errorf("soak report: %v in %q", err, out)
	}
	return r, nil
}

// problems returns the lines a soak process wrote on stderr: its
// problems, each described once.
func problems(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// server is the soak server, running in its own process group until
// finish closes its standard input.
type server struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	out   []string // stdout lines
	errb  bytes.Buffer
	ready chan struct{}
	done  chan error
	stall time.Duration
}

// startServer starts `soak server port stall` with environ and waits
// until it listens.
func startServer(prog string, environ []string, port int, stall time.Duration, prefork bool) (*server, error) {
	args := []string{"server", fmt.Sprint(port), fmt.Sprint(stall.Seconds())}
	if prefork {
		args = append(args, "prefork")
	}
	s := &server{cmd: exec.Command(prog, args...),
		ready: make(chan struct{}), done: make(chan error, 1), stall: stall}
	s.cmd.Env = environ
	s.cmd.Stderr = &lockedWriter{mu: &s.mu, w: &s.errb}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.mu.Lock()
			s.out = append(s.out, sc.Text())
			if sc.Text() == "ready" {
				close(s.ready)
			}
			s.mu.Unlock()
		}
	}()
	go func() {
		<-scanned
		s.done <- s.cmd.Wait()
	}()
	select {
	case <-s.ready:
		return s, nil
	case err := <-s.done:
		s.done <- err
		return nil, fmt.Errorf("soak server ended: %v: %s", err, s.stderr())
	case <-time.After(20 * time.Second):
		s.kill()
		return nil, errors.New("soak server: not ready after 20 s")
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errb.String()
}

// finish ends the server (its standard input closes) and returns its
// report once its connections ended; a server that does not exit in 10 s
// more than its own wait for them (twice the stall limit, and 1 s) is
// killed.
func (s *server) finish() (report, error) {
	s.stdin.Close()
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			return report{}, fmt.Errorf("soak server: %v: %s", err, s.stderr())
		}
	case <-time.After(2*s.stall + 11*time.Second):
		s.kill()
		return report{}, errors.New("soak server: did not exit within 10 s of its wait for its connections")
	}
	s.mu.Lock()
	out := strings.Join(s.out, "\n")
	s.mu.Unlock()
	return parseReport(out)
}

// kill kills the server's process group and waits for the server.
func (s *server) kill() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// clientRun is one client process: `soak client` with its arguments.
type clientRun struct {
	seed      uint64
	seconds   float64 // it starts no connection after these
	conns     int     // connections to run; 0: as many as fit the seconds
	parallel  int
	stall     time.Duration
	port      int
	prog      string
	environ   []string
	exitLimit time.Duration // killed (a hang) when it runs this much longer than seconds
}

// errHung is a client process that outlived its time limit: killed and
// counted as a hang.
var errHung = errors.New("the client process outlived its time limit: killed")

// run runs the client to its end and returns its report and what it
// wrote on stderr.
func (c clientRun) run() (report, string, error) {
	limit := time.Duration(c.seconds*float64(time.Second)) + c.exitLimit
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.prog, "client", fmt.Sprint(c.port), fmt.Sprint(c.seed),
		fmt.Sprint(c.seconds), fmt.Sprint(c.conns), fmt.Sprint(c.parallel), fmt.Sprint(c.stall.Seconds()))
	cmd.Env = c.environ
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return report{}, stderr.String(), errHung
	}
	if err != nil {
		return report{}, stderr.String(), fmt.Errorf("soak client: %v", err)
	}
	r, err := parseReport(stdout.String())
	return r, stderr.String(), err
}
