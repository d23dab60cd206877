package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/shim/config"
	"github.com/sdpshim/sdpshim/shim/stats"
)

// How the preload tests run programs: each side gets an environment
// (shimmed or plain), its own log file, a run directory shared by the
// test's processes, and a time limit; nothing is left running.

// side is one program's setup.
type side struct {
	shim bool
	env  []string // extra NAME=VALUE
	log  string   // SDPSHIM_LOG_FILE (debug level) when shimmed
}

// runDir returns a fresh run directory for one test (short: sun_path).
func runDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sdprd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "run")
}

// environ returns the environment of a program run as s.
func (a artefacts) environ(t *testing.T, s side, rundir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_PRELOAD=") && !strings.HasPrefix(kv, "SDPSHIM_") {
			env = append(env, kv)
		}
	}
	env = append(env, "SDPSHIM_RUNDIR="+rundir)
	if s.shim {
		env = append(env, "LD_PRELOAD="+a.lib)
		if s.log != "" {
			env = append(env, "SDPSHIM_LOG_LEVEL=debug", "SDPSHIM_LOG_FILE="+s.log)
		}
		// The tests check that connections are accelerated, short ones
		// included; the short-lived policy (shim/shortconn.go), which
		// would keep some of a process's connections on kernel TCP, has
		// tests of its own and is on only where a side asks for it.
		if _, set := config.Getenv(s.env, "SDPSHIM_SHORT_CONN"); !set {
			env = append(env, "SDPSHIM_SHORT_CONN=0")
		}
	}
	return append(env, s.env...)
}

// proc is a running program.
type proc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    *lockedBuffer
	errb   *lockedBuffer
	done   chan error
	in     io.WriteCloser // its stdin (startPiped), else nil
}

// start starts a program that must end within limit.
func start(t *testing.T, env []string, limit time.Duration, name string, args ...string) *proc {
	t.Helper()
	return startCmd(t, env, limit, false, name, args...)
}

// startPiped is start with a pipe to the program's stdin (p.in).
func startPiped(t *testing.T, env []string, limit time.Duration, name string, args ...string) *proc {
	t.Helper()
	return startCmd(t, env, limit, true, name, args...)
}

func startCmd(t *testing.T, env []string, limit time.Duration, piped bool, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	// A descendant that inherited the output pipes (a forked server's
	// worker) must not keep Wait, and so the test, from ending.
	cmd.WaitDelay = 5 * time.Second
	p := &proc{cmd: cmd, cancel: cancel, out: new(lockedBuffer), errb: new(lockedBuffer), done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.errb
	if piped {
		in, err := cmd.StdinPipe()
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		p.in = in
	}
	cmd.Cancel = func() error {
		if ctx.Err() == context.DeadlineExceeded {
			t.Logf("%s ran past its limit of %v; before it is killed:\n%s", name, limit, shimState(env))
		}
		return cmd.Process.Kill()
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-p.done
	})
	return p
}

// shimState describes every shimmed process of the run directory in env
// (its stats snapshot: connections with their bytes and flow control,
// channels, waiters), so a hang leaves its state in the test's output.
func shimState(env []string) string {
	var rd string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SDPSHIM_RUNDIR="); ok {
			rd = v
		}
	}
	eps, err := stats.List(rd)
	if err != nil || rd == "" {
		return fmt.Sprintf("no stats (run directory %q: %v)", rd, err)
	}
	var b strings.Builder
	for _, ep := range eps {
		s, err := stats.Fetch(ep.Path, 3*time.Second)
		if err != nil {
			fmt.Fprintf(&b, "pid %d: %v\n", ep.PID, err)
			continue
		}
		j, _ := json.Marshal(s)
		fmt.Fprintf(&b, "pid %d: %s\n", ep.PID, j)
	}
	return b.String()
}

// wait waits for p to end and returns its error (killed at its time
// limit: an error).
func (p *proc) wait() error {
	err := <-p.done
	p.done <- err // for the cleanup
	return err
}

// listening waits for the server's {"event":"listening","port":N} line.
func (p *proc) listening(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	re := regexp.MustCompile(`"event":"listening".*"port":(\d+)`)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			port, _ := strconv.Atoi(m[1])
			return port
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server ended before listening: %v\n%s", err, p.errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("server not listening after 10 s\n%s", p.errb.String())
	return 0
}

// result returns the JSON result line of a demo program (role r).
func result(t *testing.T, out, role string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"role":"`+role+`"`) {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("result line %q: %v", sc.Text(), err)
			}
			return m
		}
	}
	t.Fatalf("no %s result in output:\n%s", role, out)
	return nil
}

// readLog returns a shim log file's contents ("" when never written).
func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// kernelBytes returns the most payload bytes the kernel's TCP received on
// any established socket with local port port, as ss reports them
// (tcp_info bytes_received); found is false when none was seen.
func kernelBytes(port int) (bytes uint64, found bool) {
	out, err := exec.Command("ss", "-Htin", "state", "established", fmt.Sprintf("( sport = :%d )", port)).Output()
	if err != nil {
		return 0, false
	}
	for _, m := range regexp.MustCompile(`bytes_received:(\d+)`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		bytes = max(bytes, n)
	}
	return bytes, strings.Contains(string(out), fmt.Sprintf(":%d", port))
}

// sampler polls kernelBytes until stopped.
type sampler struct {
	stop    chan struct{}
	done    chan struct{}
	max     uint64
	samples int
}

func sampleKernel(port int) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			if b, ok := kernelBytes(port); ok {
				s.samples++
				s.max = max(s.max, b)
			}
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() (maxBytes uint64, samples int) {
	close(s.stop)
	<-s.done
	return s.max, s.samples
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var _ io.Writer = (*lockedBuffer)(nil)
