package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sdpshim/sdpshim/shim/stats"
)

// What the real-program tests (programs_*_test.go) share: the three ways
// of running a client/server pair, and how a test learns which
// connections were accelerated and which fell back, and why.
//
// A client's verdicts come from its debug log (it has exited by the time
// the test looks). A server's come from the stats socket of every shimmed
// process still alive in the run directory (`sdpshim stats`), cross-checked
// against its log.

// forkAccelerates says whether connections served by a fork child
// (pre-fork servers: nginx workers; fork per connection: postgres
// backends) are accelerated: fork children run a core of their own
// (preload/c/core.c) and claim the connections they first use (deferred
// acceptance, shim/deferred_accept.go). Were it false, tests would accept
// that those connections fall back with reasonForkFallback and still
// require every byte to be right.
const forkAccelerates = true

// Reasons as docs/reasons.md names them.
const (
	reasonNotShimmed  = "peer-not-shimmed"
	reasonForkDecline = "fork-exec-decline"
	// A deferred connection nobody claimed, and one whose acceptor
	// answered on kernel TCP (shim/deferred.go).
	reasonDeferredUnclaimed = "deferred-unclaimed"
	reasonDeferredPlain     = "deferred-acceptor-plain"
)

// reasonForkFallback are the reasons a connection to a listener shared
// with fork children may fall back for while forkAccelerates is false:
// the parent withdraws the listener's rendezvous entry when a child
// inherits it (the client finds none), or a child declines.
var reasonForkFallback = []string{reasonNotShimmed, reasonForkDecline}

// mode is which side of a pair runs under the shim.
type mode struct {
	name           string
	server, client bool
}

var (
	bothShimmed = mode{"both", true, true}
	clientOnly  = mode{"client-only", false, true}
	serverOnly  = mode{"server-only", true, false}
	allModes    = []mode{bothShimmed, clientOnly, serverOnly}
)

// accelerated reports whether m's connections should be accelerated.
func (m mode) accelerated() bool { return m.server && m.client }

// pairRun is one run of a program pair in a mode: the run directory and
// a log file per side.
type pairRun struct {
	a      artefacts
	m      mode
	rd     string
	srvLog string
	cliLog string
	// serverExited says the server has ended by the time of the checks:
	// its verdicts come from its log alone.
	serverExited bool
}

func newPairRun(t *testing.T, a artefacts, m mode) *pairRun {
	t.Helper()
	logs := t.TempDir()
	r := &pairRun{a: a, m: m, rd: runDir(t),
		srvLog: filepath.Join(logs, "server.log"), cliLog: filepath.Join(logs, "client.log")}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range []string{r.srvLog, r.cliLog} {
				t.Logf("end of %s:\n%s", filepath.Base(l), tail(readLog(t, l), 30))
			}
		}
	})
	return r
}

// serverEnv and clientEnv are the environments of the two sides.
func (r *pairRun) serverEnv(t *testing.T, extra ...string) []string {
	return r.a.environ(t, side{shim: r.m.server, log: r.srvLog, env: extra}, r.rd)
}

func (r *pairRun) clientEnv(t *testing.T, extra ...string) []string {
	return r.a.environ(t, side{shim: r.m.client, log: r.cliLog, env: extra}, r.rd)
}

// verdicts counts connections by outcome: accelerated, or fallen back
// by reason name.
type verdicts struct {
	accelerated int
	fallbacks   map[string]int
}

func (v verdicts) String() string {
	return fmt.Sprintf("accelerated %d, fallbacks %v", v.accelerated, v.fallbacks)
}

func (v verdicts) total() int {
	n := v.accelerated
	for _, c := range v.fallbacks {
		n += c
	}
	return n
}

var reasonField = regexp.MustCompile(`reason=("?)([a-z-]+)`)

// logVerdicts reads the verdicts of one side from a shim log: a client's
// connect() ("connected accelerated") or a server's accept() ("accepted
// accelerated"), and every connection that stayed on kernel TCP.
func logVerdicts(t *testing.T, path string, server bool) verdicts {
	t.Helper()
	v := verdicts{fallbacks: map[string]int{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return v
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := `msg="connected accelerated"`
	if server {
		want = `msg="accepted accelerated"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, want):
			v.accelerated++
		case strings.Contains(l, `msg="connection stays on kernel TCP"`),
			// The interposer's own line (an accept nobody offered,
			// preload/c/plainaccept.c).
			strings.Contains(l, `: connection stays on kernel TCP: `):
			if m := reasonField.FindStringSubmatch(l); m != nil {
				v.fallbacks[m[2]]++
			} else {
				v.fallbacks["?"]++
			}
		}
	}
	return v
}

// statsVerdicts sums the verdicts in the stats of every shimmed process
// alive in run directory rd (servers: the clients have exited), and
// returns how many processes answered.
func statsVerdicts(t *testing.T, rd string) (verdicts, int) {
	t.Helper()
	v := verdicts{fallbacks: map[string]int{}}
	eps, err := stats.List(rd)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	n := 0
	for _, ep := range eps {
		s, err := stats.Fetch(ep.Path, 5*time.Second)
		if err != nil {
			t.Logf("stats of pid %d: %v", ep.PID, err)
			continue
		}
		n++
		v.accelerated += int(s.Totals.Accelerated)
		for _, rc := range s.Fallbacks {
			v.fallbacks[rc.Name] += int(rc.Count)
		}
	}
	return v, n
}

// expectAll checks that exactly n connections of one side (who) had
// verdicts v, each of them accelerated when accel, else each fallen back
// for reason.
func expectAll(t *testing.T, who string, v verdicts, n int, accel bool, reason string) {
	t.Helper()
	switch {
	case accel && (v.accelerated != n || v.total() != n):
		t.Errorf("%s: want %d accelerated connections, got %v", who, n, v)
	case !accel && (v.fallbacks[reason] != n || v.total() != n):
		t.Errorf("%s: want %d connections fallen back for %s, got %v", who, n, reason, v)
	}
}

// checkPair checks the verdicts of a run whose client made n connections
// to a single-process server (alive now): in mode both, all accelerated on
// both sides; with one side shimmed, that side saw each fall back because
// its peer is not shimmed; an unshimmed side records nothing. atLeast
// accepts more than n (programs whose connection count varies).
func (r *pairRun) checkPair(t *testing.T, n int, atLeast bool) {
	t.Helper()
	cli := logVerdicts(t, r.cliLog, false)
	srvLog := logVerdicts(t, r.srvLog, true)
	srv, answered := statsVerdicts(t, r.rd)
	if r.serverExited {
		srv = srvLog
	} else if r.m.server && answered == 0 {
		t.Errorf("no shimmed server process served stats in %s", r.rd)
	}
	if atLeast {
		n = max(n, cli.total(), srv.total())
	}
	t.Logf("%s: client (log) %v; server (stats, %d processes) %v; server (log) %v", r.m.name, cli, answered, srv, srvLog)
	accel := r.m.accelerated()
	if r.m.client {
		expectAll(t, "client (log)", cli, n, accel, reasonNotShimmed)
	} else if cli.total() != 0 {
		t.Errorf("unshimmed client logged verdicts: %v", cli)
	}
	if r.m.server {
		expectAll(t, "server (stats)", srv, n, accel, reasonNotShimmed)
		expectAll(t, "server (log)", srvLog, n, accel, reasonNotShimmed)
	}
	if t.Failed() {
		t.Logf("client log:\n%s", tail(readLog(t, r.cliLog), 40))
		t.Logf("server log:\n%s", tail(readLog(t, r.srvLog), 40))
	}
}

// checkForked checks the client-side verdicts of at least n connections
// to a server whose connections are accepted in fork children:
// accelerated in mode both when forkAccelerates, otherwise each fallen
// back for one of reasonForkFallback (or, with the server unshimmed, for
// reasonNotShimmed). unused connections of the n may instead fall back
// as deferred-unclaimed: a client that connects and closes before sending
// anything (wrk's first probe) closes before any server process used the
// connection, so there is nothing to claim.
func (r *pairRun) checkForked(t *testing.T, n, unused int) {
	t.Helper()
	if !r.m.client {
		return
	}
	v := logVerdicts(t, r.cliLog, false)
	t.Logf("%s: fork-served connections, client (log) %v (forkAccelerates=%v)", r.m.name, v, forkAccelerates)
	defer func() {
		if t.Failed() {
			t.Logf("client log:\n%s", tail(readLog(t, r.cliLog), 40))
		}
	}()
	n = max(n, v.total())
	switch {
	case !r.m.server:
		expectAll(t, "client (log)", v, n, false, reasonNotShimmed)
	case forkAccelerates:
		unclaimed := min(v.fallbacks[reasonDeferredUnclaimed], unused)
		v.fallbacks[reasonDeferredUnclaimed] -= unclaimed
		if v.fallbacks[reasonDeferredUnclaimed] == 0 {
			delete(v.fallbacks, reasonDeferredUnclaimed)
		}
		expectAll(t, "client (log)", v, n-unclaimed, true, "")
	default:
		ok := v.accelerated
		for _, reason := range reasonForkFallback {
			ok += v.fallbacks[reason]
		}
		if ok != n {
			t.Errorf("client (log): want %d connections, each accelerated or fallen back for one of %v; got %v",
				n, reasonForkFallback, v)
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runTo runs a program to its end within limit and returns its stdout;
// a failure ends the test with its stderr.
func runTo(t *testing.T, env []string, limit time.Duration, name string, args ...string) string {
	t.Helper()
	p := start(t, env, limit, name, args...)
	if err := p.wait(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err,
			tail(p.out.String(), 20), tail(p.errb.String(), 20))
	}
	return p.out.String()
}

// needAny returns the first of the paths (glob patterns) that exists, or
// skips the test (fails it in CI).
func needAny(t *testing.T, what string, patterns ...string) string {
	t.Helper()
	for _, pat := range patterns {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			return m[len(m)-1]
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required in CI (looked for %v)", what, patterns)
	}
	t.Skipf("%s not installed (looked for %v)", what, patterns)
	return ""
}

// cbuild compiles one C test program into the test's temp dir.
func cbuild(t *testing.T, src string, extra ...string) string {
	t.Helper()
	need(t, "gcc")
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src}, extra...)
	if msg, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, msg)
	}
	return out
}

// cbuildShared is cbuild for a program many tests run: compiled once per
// test binary, into the build directory (build(t) must have run).
func cbuildShared(t *testing.T, src string, extra ...string) string {
	t.Helper()
	need(t, "gcc")
	v, _ := cbuilt.LoadOrStore(src, &cbuiltProg{})
	p := v.(*cbuiltProg)
	p.once.Do(func() {
		p.path = filepath.Join(buildDir, strings.TrimSuffix(filepath.Base(src), ".c"))
		args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-o", p.path, src}, extra...)
		if msg, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			p.err = fmt.Errorf("gcc %s: %v\n%s", src, err, msg)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

// cbuilt holds cbuildShared's programs by source path.
var cbuilt sync.Map

type cbuiltProg struct {
	once sync.Once
	path string
	err  error
}

// waitListen waits until a socket listens on 127.0.0.1:port (or p ends),
// reading /proc/net/tcp: it makes no connection, which the server would
// count.
func waitListen(t *testing.T, p *proc, port int) {
	t.Helper()
	want := fmt.Sprintf(":%04X ", port)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// tcp6 too: a JVM listens on an AF_INET6 socket for 127.0.0.1
		// (::ffff:127.0.0.1).
		b, _ := os.ReadFile("/proc/net/tcp")
		b6, _ := os.ReadFile("/proc/net/tcp6")
		for _, l := range strings.Split(string(b)+string(b6), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && strings.HasSuffix(f[1]+" ", want) && f[3] == "0A" {
				return
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server ended before listening: %v\nstdout:\n%s\nstderr:\n%s", err, tail(p.out.String(), 20), tail(p.errb.String(), 20))
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("nothing listens on port %d after 20 s\n%s", port, tail(p.errb.String(), 20))
}

// stopOnCleanup makes the test's end stop p with sig first and wait for
// it (10 s at most) before start's cleanup kills it: a server with child
// processes (nginx's workers, postgres's backends) stops them itself; a
// SIGKILL would orphan them, holding the output pipes open. Children that
// outlive the wait are killed (the test has failed then).
func stopOnCleanup(t *testing.T, p *proc, sig os.Signal) {
	t.Cleanup(func() {
		pid := p.cmd.Process.Pid
		p.cmd.Process.Signal(sig)
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not stop within 10 s of %v", p.cmd.Path, sig)
			for _, c := range descendants(pid) {
				syscall.Kill(c, syscall.SIGKILL)
			}
		}
	})
}

// descendants returns the pids of every process below pid (from /proc).
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; ppid follows ") ".
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			var state string
			var ppid int
			fmt.Sscan(string(b[i+1:]), &state, &ppid)
			parent[p] = ppid
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		next := frontier[0]
		frontier = frontier[1:]
		for c, pp := range parent {
			if pp == next {
				out = append(out, c)
				frontier = append(frontier, c)
			}
		}
	}
	return out
}
