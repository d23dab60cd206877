package programs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// mode is how the programs of one measurement run: over kernel TCP (no
// preload) or under the shim.
type mode int

const (
	kernel mode = iota
	shimmed
)

func (m mode) String() string { return [...]string{"kernel", "sdpshim"}[m] }

// env builds the environments of the programs.
type env struct {
	base []string // without LD_PRELOAD and SDPSHIM_*
	lib  string   // libsdpshim.so
	tmp  string   // scratch directory of the run
}

func newEnv(environ []string, lib, tmp string) *env {
	e := &env{lib: lib, tmp: tmp}
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_") {
			e.base = append(e.base, kv)
		}
	}
	return e
}

// of returns the environment of a program run in mode m with run
// directory rd (shared by the two sides of a measurement).
func (e *env) of(m mode, rd string) []string {
	out := append([]string(nil), e.base...)
	if m == shimmed {
		out = append(out, "LD_PRELOAD="+e.lib, "SDPSHIM_RUNDIR="+rd)
	}
	return out
}

// runDir returns a fresh run directory path (created by the shim).
func (e *env) runDir() (string, error) {
	d, err := os.MkdirTemp(e.tmp, "rd")
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "run"), nil
}

// server is a program running in the background.
type server struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

// startServer starts a server; stop ends it.
func startServer(environ []string, cred *syscall.Credential, name string, args ...string) (*server, error) {
	s := &server{cmd: exec.Command(name, args...), done: make(chan error, 1)}
	s.cmd.Env = environ
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	return s, nil
}

// stop asks the server to end with sig, then kills its process group.
func (s *server) stop(sig syscall.Signal) {
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // children left behind
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
}

// waitListen waits until something listens on 127.0.0.1:port, without
// connecting (/proc/net/tcp).
func (s *server) waitListen(port int) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if listens("/proc/net/tcp", port) {
			return nil
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("%s ended: %v\n%s", s.cmd.Path, err, tailOf(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: nothing listens on port %d", s.cmd.Path, port)
}

// listens says whether a TCP socket of the namespace whose table is
// tcpFile (/proc/net/tcp, /proc/PID/net/tcp) listens on port.
func listens(tcpFile string, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	b, _ := os.ReadFile(tcpFile)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// runClient runs a client to its end within limit and returns its output.
func runClient(environ []string, cred *syscall.Credential, limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Env = environ
	c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tailOf(string(out)))
	}
	return string(out), nil
}

func tailOf(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// carried returns out, the figures of a run in mode m with run directory
// rd, unless the run was shimmed and the shim did not carry it: the
// shimmed processes still alive in rd (the server, asked before it stops)
// must report accelerated connections, no fewer than fell back (a probe
// connection may). Otherwise the figure would be kernel TCP's under the
// preload, and the row says so instead.
func carried(m mode, rd string, out map[string]float64) (map[string]float64, error) {
	return carriedBy(m, out, func() (acc, fell uint64, err error) {
		eps, err := stats.List(rd)
		if err != nil {
			return 0, 0, fmt.Errorf("shim stats: %w", err)
		}
		for _, ep := range eps {
			s, err := stats.Fetch(ep.Path, 2*time.Second)
			if err != nil {
				continue // exited meanwhile
			}
			acc += s.Totals.Accelerated
			fell += s.Totals.Fallbacks
		}
		return acc, fell, nil
	})
}

// carriedLog is carried for a run whose serving processes are gone: the
// client's debug log (SDPSHIM_LOG_FILE) counts its connections.
func carriedLog(m mode, log string, out map[string]float64) (map[string]float64, error) {
	return carriedBy(m, out, func() (acc, fell uint64, err error) {
		b, err := os.ReadFile(log)
		if err != nil {
			return 0, 0, fmt.Errorf("client log: %w", err)
		}
		acc = uint64(strings.Count(string(b), `msg="connected accelerated"`))
		fell = uint64(strings.Count(string(b), `msg="connection stays on kernel TCP"`))
		return acc, fell, nil
	})
}

// carriedBy returns out unless m is shimmed and count (the connections
// accelerated and fallen back) says the shim did not carry the run.
func carriedBy(m mode, out map[string]float64, count func() (acc, fell uint64, err error)) (map[string]float64, error) {
	if m != shimmed {
		return out, nil
	}
	acc, fell, err := count()
	if err != nil {
		return nil, err
	}
	if acc == 0 || fell > acc {
		return nil, fmt.Errorf("not carried by the shim: %d connections accelerated, %d fell back", acc, fell)
	}
	return out, nil
}
