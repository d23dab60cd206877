package ctest

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoSize is odd on purpose: no read or write lines up with a block.
const echoSize = 1<<20 + 12345

var (
	echoLoops = []string{"iter", "fork", "poll", "ppoll", "select", "pselect", "epoll", "epoll_pwait", "epoll_pwait2"}
	echoIOs   = []string{"rw", "send", "sendto", "vec", "msg", "mmsg", "waitall"}
)

type echoServer struct {
	cmd  *exec.Cmd
	port string
	out  io.ReadCloser
}

func startEchoServer(t *testing.T, b built, env []string, loop string, nconn int, extra ...string) *echoServer {
	t.Helper()
	cmd := exec.Command(b.echo, append([]string{"server", loop, strconv.Itoa(nconn)}, extra...)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "port ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("echo server %s: %q %v; stderr: %s", loop, line, err, stderr.String())
	}
	return &echoServer{cmd: cmd, port: strings.TrimSpace(strings.TrimPrefix(line, "port ")), out: out}
}

// wait expects the server to exit 0 within 30 s.
func (s *echoServer) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, s.out); done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("echo server: %v", err)
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("echo server did not finish")
	}
}

// TestEcho sends data through every event loop and I/O call pair and checks
// every byte, in each set-up. With the fake core, every byte must also have
// gone through its hooks, in both processes.
func TestEcho(t *testing.T) {
	b := artefacts(t)
	for _, s := range setups {
		for _, loop := range echoLoops {
			t.Run(string(s)+"/"+loop, func(t *testing.T) {
				log := filepath.Join(t.TempDir(), "fake.log")
				env := b.env(s, log)
				srv := startEchoServer(t, b, env, loop, len(echoIOs))
				for i, io := range echoIOs {
					r := runProg(t, env, b.echo, "client", srv.port, strconv.Itoa(echoSize), strconv.Itoa(i+1), io)
					if r.err != nil || !strings.HasPrefix(r.stdout, fmt.Sprintf("ok %d ", echoSize)) {
						t.Errorf("client %s: %v\nstdout: %s\nstderr: %s", io, r.err, r.stdout, r.stderr)
					}
				}
				srv.wait(t)
				if s == fakecore {
					checkEchoStats(t, fakeLog(t, log), loop)
				}
			})
		}
	}
}

// checkEchoStats: each client moved echoSize bytes each way through the
// core; a server that did not fork moved them all.
func checkEchoStats(t *testing.T, log, loop string) {
	t.Helper()
	clients, server := 0, false
	want := fmt.Sprintf("in=%d out=%d ", echoSize, echoSize)
	all := fmt.Sprintf("in=%d out=%d ", echoSize*len(echoIOs), echoSize*len(echoIOs))
	for _, line := range events(log, "stats") {
		switch {
		case strings.Contains(line, want):
			clients++
		case strings.Contains(line, all):
			server = true
		case loop == "fork" && strings.Contains(line, "in=0 out=0 "):
			// the forking server's parent only accepts
		default:
			t.Errorf("unexpected byte counts: %s", line)
		}
	}
	if clients != len(echoIOs) {
		t.Errorf("%d clients went through the core, want %d\n%s", clients, len(echoIOs), log)
	}
	if loop != "fork" && !server {
		t.Errorf("server bytes did not all go through the core\n%s", log)
	}
	if loop == "fork" && len(events(log, "fork_child")) != len(echoIOs) {
		t.Errorf("want %d fork_child hooks\n%s", len(echoIOs), log)
	}
	if strings.Contains(log, "protected broken") {
		t.Errorf("the core's protected fds were broken\n%s", log)
	}
	if loop != "iter" && loop != "fork" {
		polls := "polls=0 epolls=0"
		for _, line := range events(log, "stats") {
			if strings.Contains(line, all) && strings.Contains(line, polls) {
				t.Errorf("server's %s loop never reached the core's poll hooks: %s", loop, line)
			}
		}
	}
}

// TestEchoIPv6 runs the same over ::1.
func TestEchoIPv6(t *testing.T) {
	b := artefacts(t)
	for _, s := range setups {
		t.Run(string(s), func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			env := b.env(s, log)
			srv := startEchoServer(t, b, env, "epoll", 2, "v6")
			for i, io := range []string{"send", "msg"} {
				r := runProg(t, env, b.echo, "client", srv.port, "300000", strconv.Itoa(i), io, "v6")
				if r.err != nil || !strings.HasPrefix(r.stdout, "ok 300000 ") {
					t.Errorf("client %s: %v %s %s", io, r.err, r.stdout, r.stderr)
				}
			}
			srv.wait(t)
			if s == fakecore && len(events(fakeLog(t, log), "stats")) != 3 {
				t.Errorf("want 3 processes through the core:\n%s", fakeLog(t, log))
			}
		})
	}
}

// TestEchoWaits drives the SDPSHIM_WAIT loop: FD waits (default) and FUTEX
// waits (the fake core sleeps 1 ms on a word nobody wakes), with small
// reads so that many calls have to wait, and partial progress on blocking
// sends and MSG_WAITALL.
func TestEchoWaits(t *testing.T) {
	b := artefacts(t)
	for _, mode := range []string{"", "futex"} {
		t.Run("mode="+mode, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "fake.log")
			env := b.env(fakecore, log, "FAKECORE_MODE="+mode, "ECHO_RDCAP=777")
			ios := []string{"rw", "waitall", "msg", "vec"}
			srv := startEchoServer(t, b, env, "iter", len(ios))
			for i, io := range ios {
				r := runProg(t, env, b.echo, "client", srv.port, "2000000", strconv.Itoa(i), io)
				if r.err != nil || !strings.HasPrefix(r.stdout, "ok 2000000 ") {
					t.Errorf("client %s: %v %s %s", io, r.err, r.stdout, r.stderr)
				}
			}
			srv.wait(t)
			waited := false
			for _, line := range events(fakeLog(t, log), "stats") {
				waited = waited || !strings.Contains(line, "waits=0 ")
			}
			if !waited {
				t.Errorf("no call ever waited:\n%s", fakeLog(t, log))
			}
		})
	}
}
