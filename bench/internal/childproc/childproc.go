// Package childproc runs the other side of a two-process benchmark: the
// running executable re-executed, told its job by an environment
// variable, handed one end of a unix socketpair as fd 3 (FD), answering
// with one JSON report on its stdout.
//
// The parent calls Start and later Finish; the child's program calls
// Serve first thing (an init function, or TestMain), which does nothing
// unless the variable is set.
package childproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FD is the child's end of the socketpair.
const FD = 3

// Proc is a running child.
type Proc struct {
	cmd       *exec.Cmd
	out, errs bytes.Buffer
	done      chan error
}

// Start re-executes this program with name=value added to its
// environment and returns the child and the parent's end of a connected
// unix stream socketpair (the caller closes it). The child dies with the
// parent (PR_SET_PDEATHSIG).
func Start(name, value string) (*Proc, int, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, -1, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), name)
	p := &Proc{cmd: exec.Command(exe), done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), name+"="+value)
	p.cmd.ExtraFiles = []*os.File{child}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = p.cmd.Start()
	child.Close()
	if err != nil {
		unix.Close(fds[0])
		return nil, -1, fmt.Errorf("start child: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, fds[0], nil
}

// Stderr returns what the child wrote to its stderr so far, trimmed. Call
// it after Kill or Finish.
func (p *Proc) Stderr() string { return string(bytes.TrimSpace(p.errs.Bytes())) }

// Finish waits up to timeout for the child to exit and decodes its report
// into report; on timeout it kills the child.
func (p *Proc) Finish(timeout time.Duration, report any) error {
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("child: %v: %s", err, p.Stderr())
		}
	case <-time.After(timeout):
		p.Kill()
		return errors.New("child did not finish in " + timeout.String())
	}
	if err := json.Unmarshal(p.out.Bytes(), report); err != nil {
		return fmt.Errorf("child report: %v (%q)", err, p.out.String())
	}
	return nil
}

// Kill ends the child and waits for it.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Serve makes this process a child when the environment sets name: it
// calls job with the value, writes the report job returns to stdout as
// JSON and exits (status 2 when the report cannot be written). Otherwise
// it returns at once.
func Serve(name string, job func(value string) any) {
	value, ok := os.LookupEnv(name)
	if !ok {
		return
	}
	if err := json.NewEncoder(os.Stdout).Encode(job(value)); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(2)
	}
	os.Exit(0)
}
