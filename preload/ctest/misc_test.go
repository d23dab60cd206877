package ctest

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestMisc runs each one-shot check of testdata/misc.c in each set-up, and
// checks with the fake core that the calls took the expected hooks.
func TestMisc(t *testing.T) {
	b := artefacts(t)
	for _, cmd := range []string{"files", "fcntl", "dup", "closerange", "fork", "vfork", "spawn", "sigpipe", "udp"} {
		for _, s := range setups {
			t.Run(cmd+"/"+string(s), func(t *testing.T) {
				log := filepath.Join(t.TempDir(), "fake.log")
				r := runProg(t, b.env(s, log, "MISC_RDCAP=97"), b.misc, cmd)
				if r.err != nil || strings.TrimSpace(r.stdout) != "ok "+cmd {
					t.Fatalf("misc %s: %v\nstdout: %s\nstderr: %s", cmd, r.err, r.stdout, r.stderr)
				}
				if s != fakecore {
					return
				}
				lg := fakeLog(t, log)
				for ev, n := range miscHooks[cmd] {
					if got := len(events(lg, ev)); got < n || (n == 0 && got != 0) {
						t.Errorf("%d %q events, want %s\n%s", got, ev, atLeast(n), lg)
					}
				}
				if cmd == "vfork" || cmd == "spawn" {
					if pids := pidsOf(lg); len(pids) != 1 {
						t.Errorf("a child entered the core (pids %v)\n%s", pids, lg)
					}
				}
				if cmd == "fork" {
					checkForkChild(t, lg)
				}
			})
		}
	}
}

// miscHooks: for each check, fake-core events it must show at least n
// times (n == 0: never).
var miscHooks = map[string]map[string]int{
	"files":      {"init": 1, "sendfile": 1, "splice": 1},
	"fcntl":      {"nonblock": 4, "dup": 2, "fionread": 1},
	"dup":        {"dup": 4, "close": 5},
	"closerange": {"close": 3},
	"fork":       {"fork_prepare": 1, "fork_child": 1},
	"vfork":      {"init": 1, "close": 0, "fork_prepare": 2}, // prepare: sockets an exec inherits go to kernel TCP
	"spawn":      {"fork_prepare": 4},
	"sigpipe":    {"init": 1},
	"udp":        {"init": 0},
}

func atLeast(n int) string {
	if n == 0 {
		return "none"
	}
	return "at least " + strconv.Itoa(n)
}

func pidsOf(log string) map[string]bool {
	pids := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			pids[f[0]] = true
		}
	}
	return pids
}

// checkForkChild: after fork_child, the child never called its parent's
// core again; its new connection loaded its own copy of the core (a
// fresh init), which took the child's calls from then on.
func checkForkChild(t *testing.T, log string) {
	t.Helper()
	child := strings.Fields(events(log, "fork_child")[0])[0]
	state := 0 // 1 after fork_child, 2 after the child's own init
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != child {
			continue
		}
		switch {
		case f[1] == "fork_child":
			state = 1
		case state == 1 && f[1] == "init":
			state = 2
		case state == 1:
			t.Errorf("the fork child called its parent's core after fork_child: %s", line)
		}
	}
	if state != 2 {
		t.Errorf("the fork child's new socket did not load its own copy of the core:\n%s", log)
	}
}

// TestSigpipeKills: a write to a closed connection with SIGPIPE at its
// default disposition kills the program, with or without the shim.
func TestSigpipeKills(t *testing.T) {
	b := artefacts(t)
	for _, s := range setups {
		t.Run(string(s), func(t *testing.T) {
			r := runProg(t, b.env(s, filepath.Join(t.TempDir(), "fake.log"), "MISC_DIE=1"), b.misc, "sigpipe")
			var ee *exec.ExitError
			if !errors.As(r.err, &ee) {
				t.Fatalf("want death by SIGPIPE, got %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			ws := ee.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
				t.Errorf("want death by SIGPIPE, got %v", ws)
			}
		})
	}
}

// TestUnseenSockets: a TCP socket whose calls the kernel answers alone
// (socket options the core does not keep, O_NONBLOCK, FIONBIO,
// getsockopt, bind, close) never reaches the core; a plain run of the
// short-lived rule (the fake core starts one of 2 at its listen) takes
// the next two connects to that port without the core, counted in
// host->short_plain; the third connect, and a socket given a buffer size
// before its connect, reach the core, and every byte arrives.
func TestUnseenSockets(t *testing.T) {
	lg := miscFake(t, "unseen", "FAKECORE_MODE=shortrun")
	stats, run := events(lg, "stats"), events(lg, "shortrun")
	if len(run) != 1 || !strings.HasSuffix(run[0], " 1") || len(events(lg, "socket")) != 3 || len(events(lg, "connect")) != 2 ||
		len(events(lg, "accept")) != 4 || len(stats) != 1 || !strings.HasSuffix(stats[0], "short=2") {
		t.Errorf("want the listener and two connectors adopted, two connects kept plain alone:\n%s", lg)
	}
}

// TestAdoptRace: two threads give a new socket a buffer size at the same
// moment, 100 times: the core is told of each socket once (one thread
// adopts it, the other waits), and each option reaches the core.
func TestAdoptRace(t *testing.T) {
	lg := miscFake(t, "adoptrace")
	if n, m := len(events(lg, "socket")), len(events(lg, "close")); n != 100 || m != 100 {
		t.Errorf("%d socket and %d close events, want 100 of each:\n%s", n, m, lg)
	}
}

// TestProtected: the fake core keeps a pipe at fds 100 and 101, PROTECTED.
// The program's close, close_range, read, write, fcntl, poll and select on
// them fail or skip them as for fds that are not open, and dup2 onto one
// makes the core move it (to 200).
func TestProtected(t *testing.T) {
	lg := miscFake(t, "protected")
	checks := events(lg, "protected")
	if len(events(lg, "evict")) != 1 || len(checks) == 0 || !strings.HasSuffix(checks[len(checks)-1], "protected ok 200 101") {
		t.Errorf("protected fds not kept intact:\n%s", lg)
	}
	if strings.Contains(lg, "broken") {
		t.Errorf("a protected fd was broken:\n%s", lg)
	}
}

// miscFake runs the misc program's mode under the fake core (with the
// extra environment given), checks that it ends with "ok MODE", and
// returns the fake core's log.
func miscFake(t *testing.T, mode string, env ...string) string {
	t.Helper()
	b := artefacts(t)
	log := filepath.Join(t.TempDir(), "fake.log")
	r := runProg(t, b.env(fakecore, log, env...), b.misc, mode)
	if r.err != nil || strings.TrimSpace(r.stdout) != "ok "+mode {
		t.Fatalf("misc %s: %v\n%s%s", mode, r.err, r.stdout, r.stderr)
	}
	return fakeLog(t, log)
}
