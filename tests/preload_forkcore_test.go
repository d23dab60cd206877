package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Fork children that run their own copy of the core (testdata/forkcore.c):
// a process whose core runs makes a sealed memfd copy of the core (ahead
// when it listens, else at its second fork; the child of a first fork
// makes its own); its fork children load it on first need and are
// accelerated like any process. Each exchange is checked byte for byte by
// the program against a shimmed echo server; the shared log (each line
// tagged with its pid) tells which process connected accelerated.

// forkCoreProg builds testdata/forkcore.c once.
func forkCoreProg(t *testing.T) (artefacts, string) {
	t.Helper()
	a := build(t)
	return a, cbuildShared(t, "testdata/forkcore.c")
}

// forkCoreRun starts a shimmed epoll echo server for nconn connections and
// runs forkcore PORT args... shimmed (extra environment env); it returns
// forkcore's output and the log of both programs, less the echo server's
// own core copy (a listening process makes it ahead of any fork: not
// forkcore's).
func forkCoreRun(t *testing.T, nconn int, env []string, args ...string) (string, string) {
	t.Helper()
	a, prog := forkCoreProg(t)
	rd := runDir(t)
	log := filepath.Join(t.TempDir(), "shim.log")
	srv := start(t, a.environ(t, side{shim: true, log: log}, rd), 90*time.Second, a.echo, "server", "epoll", fmt.Sprint(nconn))
	port := echoPort(t, srv)
	cli := start(t, a.environ(t, side{shim: true, log: log, env: env}, rd), 90*time.Second, prog, append([]string{fmt.Sprint(port)}, args...)...)
	if err := cli.wait(); err != nil {
		t.Fatalf("forkcore %v: %v\n%s\n%s\necho server: %s\nlog:\n%s", args, err, cli.out.String(), cli.errb.String(),
			srv.errb.String(), readLog(t, log))
	}
	if err := srv.wait(); err != nil {
		t.Fatalf("echo server: %v\n%s", err, srv.errb.String())
	}
	serverCopy := fmt.Sprintf("sdpshim[%d]: debug: fork: core copy for fork children", srv.cmd.Process.Pid)
	var lines []string
	for _, l := range strings.Split(readLog(t, log), "\n") {
		if !strings.HasPrefix(l, serverCopy) {
			lines = append(lines, l)
		}
	}
	return cli.out.String(), strings.Join(lines, "\n")
}

var (
	connectedRE = regexp.MustCompile(`msg="connected accelerated".* pid=(\d+)`)
	pidOkRE     = regexp.MustCompile(`(?m)^(?:gen \d+|child) (\d+) ok$`)
)

// accelerated counts the "connected accelerated" lines of each pid.
func accelerated(log string) map[string]int {
	n := map[string]int{}
	for _, m := range connectedRE.FindAllStringSubmatch(log, -1) {
		n[m[1]]++
	}
	return n
}

// forkCoreChild runs forkcore in a mode where one child reports done
// (forkcore PORT mode 1MiB, two connections) and returns the child's pid
// and the log.
func forkCoreChild(t *testing.T, env []string, mode string) (string, string) {
	t.Helper()
	out, log := forkCoreRun(t, 2, env, mode, fmt.Sprint(1<<20))
	pids := okPIDs(out)
	if len(pids) != 1 {
		t.Fatalf("child did not report:\n%s", out)
	}
	return pids[0], log
}

// okPIDs returns the pids forkcore reported done.
func okPIDs(out string) []string {
	var pids []string
	for _, m := range pidOkRE.FindAllStringSubmatch(out, -1) {
		pids = append(pids, m[1])
	}
	return pids
}

func noWarnings(t *testing.T, log string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=warn") || strings.Contains(l, "level=error") || strings.Contains(l, ": warn:") {
			t.Errorf("warning in the log: %s", l)
		}
	}
}

// Five generations: every process (child, grandchild, ...) connects
// accelerated through its own copy of the core, twice; each forker keeps
// working on the connection its child inherited (switched to kernel TCP)
// and on a new accelerated one. From the fourth generation on, the fd
// number of the copy repeats one an ancestor's copy was loaded from.
func TestForkCoreGenerations(t *testing.T) {
	const depth = 4
	out, log := forkCoreRun(t, 2*(depth+1), nil, "gens", fmt.Sprint(depth), fmt.Sprint(3<<20))
	pids := okPIDs(out)
	if len(pids) != depth+1 {
		t.Fatalf("%d processes reported, want %d:\n%s", len(pids), depth+1, out)
	}
	acc := accelerated(log)
	for _, pid := range pids {
		// The first process's own first connection loads its core from the
		// file and is accelerated too: two each.
		if acc[pid] != 2 {
			t.Errorf("pid %s connected accelerated %d times, want 2", pid, acc[pid])
		}
	}
	if n := strings.Count(log, "fork: core copy for fork children"); n != depth {
		t.Errorf("%d core copies made, want one per forking process (%d)", n, depth)
	}
	if n := strings.Count(log, "fork: connection switched to kernel TCP"); n < depth {
		t.Errorf("%d connections switched at fork, want %d at least", n, depth)
	}
	noWarnings(t, log)
	if t.Failed() {
		t.Logf("output:\n%s\nlog:\n%s", out, log)
	}
}

// Twenty children forked one after the other all connect accelerated:
// the first from a copy of its own, the others from the one copy their
// parent made at its second fork (one memfd in its fd table).
func TestForkCoreSequence(t *testing.T) {
	const n = 20
	out, log := forkCoreRun(t, n+1, nil, "seq", fmt.Sprint(n), fmt.Sprint(1<<20))
	pids := okPIDs(out)
	if len(pids) != n {
		t.Fatalf("%d children reported, want %d:\n%s", len(pids), n, out)
	}
	acc := accelerated(log)
	for _, pid := range pids {
		if acc[pid] != 1 {
			t.Errorf("child %s connected accelerated %d times, want 1", pid, acc[pid])
		}
	}
	if !strings.Contains(out, "memfds 1\n") {
		t.Errorf("the parent should hold exactly one core copy:\n%s", out)
	}
	// The first child made its own (the parent's first fork makes none);
	// the parent made one at its second fork, shared by the other 19.
	if c := strings.Count(log, "fork: core copy for fork children"); c != 2 {
		t.Errorf("%d core copies made, want 2", c)
	}
	noWarnings(t, log)
}

// Signals in a child: the handlers the parent's Go runtime installed are
// replaced by the actions from before the core loaded (default SIGPIPE
// kills a child writing to a closed pipe, whether it loaded its copy or
// not), the program's SIGUSR1 handler runs before and after the child's
// core loads; the child still connects accelerated.
func TestForkCoreSignals(t *testing.T) {
	child, log := forkCoreChild(t, nil, "signals")
	if acc := accelerated(log); acc[child] != 1 {
		t.Errorf("child connected accelerated %d times, want 1\n%s", acc[child], log)
	}
	noWarnings(t, log)
}

// A fork from a signal handler: the Go runtime runs the program's
// handlers on a signal stack it gives the thread, from memory that fork
// children do not get (preload/entry/forkmem.c), so a handler that forks
// (a pre-fork server starting a worker from its SIGCHLD handler) must
// hand that stack on; a child forked elsewhere must not keep a signal
// stack it lacks. Both children run, and the second one connects
// accelerated.
func TestForkCoreHandlerFork(t *testing.T) {
	out, log := forkCoreRun(t, 2, nil, "handlerfork", fmt.Sprint(1<<20))
	pids := okPIDs(out)
	if len(pids) != 2 {
		t.Fatalf("children reported %v, want 2:\n%s", pids, out)
	}
	if acc := accelerated(log); acc[pids[1]] != 1 {
		t.Errorf("second child connected accelerated %d times, want 1\n%s", acc[pids[1]], log)
	}
	noWarnings(t, log)
}

// daemon() forks inside libc, where the interposed fork() does not see
// it, and its child goes on as the process. The interposer's atfork
// handlers take that fork through the same steps, so the daemon is a fork
// child like any other: it never enters the parent's runtime (which hung
// it one time in ten before), and its connection is accelerated through
// its own copy of the core. The exchange is checked byte for byte.
func TestForkCoreDaemon(t *testing.T) {
	out, log := forkCoreRun(t, 2, nil, "daemon", fmt.Sprint(1<<20))
	pids := okPIDs(out)
	if len(pids) != 1 {
		t.Fatalf("the daemon did not report:\n%s", out)
	}
	if acc := accelerated(log); acc[pids[0]] != 1 {
		t.Errorf("the daemon connected accelerated %d times, want 1\n%s", acc[pids[0]], log)
	}
	noWarnings(t, log)
}

// SDPSHIM_ENABLE keeps its meaning in a fork child: set to 0 before the
// child's first socket, the child's connection stays on kernel TCP; with
// it 0 from the start, no process loads a core.
func TestForkCoreEnable(t *testing.T) {
	child, log := forkCoreChild(t, nil, "noenable")
	acc := accelerated(log)
	if acc[child] != 0 {
		t.Errorf("child with SDPSHIM_ENABLE=0 connected accelerated\n%s", log)
	}
	if len(acc) != 1 {
		t.Errorf("want the parent alone accelerated, got %v\n%s", acc, log)
	}
	if !strings.Contains(log, "fork child: core not loaded: SDPSHIM_ENABLE turns the shim off") {
		t.Errorf("no line for the child's setting\n%s", log)
	}

	_, log = forkCoreChild(t, []string{"SDPSHIM_ENABLE=0"}, "noenable")
	if acc := accelerated(log); len(acc) != 0 {
		t.Errorf("a SDPSHIM_ENABLE=0 program connected accelerated: %v\n%s", acc, log)
	}
	if strings.Contains(log, "fork: core copy") {
		t.Errorf("a core copy was made with SDPSHIM_ENABLE=0\n%s", log)
	}
}

// The copy's fd is the shim's: the program's close() of that number fails
// with EBADF, its dup2() onto it succeeds (the copy moves to another
// number), and later children still connect accelerated.
func TestForkCoreEvict(t *testing.T) {
	out, log := forkCoreRun(t, 3, nil, "evict", fmt.Sprint(1<<20))
	pids := okPIDs(out)
	if len(pids) != 2 {
		t.Fatalf("%d children reported, want 2:\n%s", len(pids), out)
	}
	acc := accelerated(log)
	for _, pid := range pids {
		if acc[pid] != 1 {
			t.Errorf("child %s connected accelerated %d times, want 1\n%s", pid, acc[pid], log)
		}
	}
	if !strings.Contains(out, "memfds 1\n") {
		t.Errorf("the parent should hold exactly one core copy:\n%s", out)
	}
	noWarnings(t, log)
}

// The core never changes a program thread's signal mask, and a SIGCHLD
// the program blocks is not handled on one of the Go runtime's threads
// meanwhile (the runtime unblocks SIGCHLD in its threads): the postgres
// postmaster, which blocks it outside select(), lost its startup process
// that way (its reaper ran before the child's pid was recorded).
func TestForkCoreSignalMask(t *testing.T) {
	out, log := forkCoreRun(t, 2, nil, "sigmask", fmt.Sprint(64<<10))
	if !strings.Contains(out, "sigmask ok") {
		t.Fatalf("forkcore sigmask:\n%s", out)
	}
	if !strings.Contains(log, "SIGCHLD handler routed away from the runtime's threads") {
		t.Errorf("no routing of the program's SIGCHLD handler logged\n%s", log)
	}
}
