package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Servers that fork, exec, vfork or spawn around accelerated connections
// (testdata/fork_echo.c) echo every byte exactly, the same as on kernel
// TCP: a connection the child inherits is switched to kernel TCP before
// the fork, with the client's core's help, including the bytes the
// client had already sent over shared memory (the server pauses after
// accept so that they pile up). The logs tell which connections were
// accelerated and which were switched or fell back.

// forkEcho builds testdata/fork_echo.c once.
func forkEcho(t *testing.T) (artefacts, string) {
	t.Helper()
	a := build(t)
	return a, cbuildShared(t, "testdata/fork_echo.c", "-pthread")
}

// forkRun runs one server in mode and clients of the given sizes, one
// after the other, every program shimmed or none; it returns the server's
// log and each client's.
func forkRun(t *testing.T, shim bool, mode string, delayMS int, sizes ...int) (string, []string) {
	return forkRunLazy(t, shim, mode, delayMS, 0, sizes...)
}

// forkRunLazy is forkRun with clients that start reading readDelayMS
// after they connect.
func forkRunLazy(t *testing.T, shim bool, mode string, delayMS, readDelayMS int, sizes ...int) (string, []string) {
	t.Helper()
	a, prog := forkEcho(t)
	rd := runDir(t)
	logs := t.TempDir()
	srvSide := side{shim: shim, log: filepath.Join(logs, "server.log")}
	srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, prog, "server", mode, fmt.Sprint(len(sizes)), fmt.Sprint(delayMS))
	port := echoPort(t, srv)
	var cliLogs []string
	for i, n := range sizes {
		cliSide := side{shim: shim, log: filepath.Join(logs, fmt.Sprintf("client%d.log", i))}
		cli := start(t, a.environ(t, cliSide, rd), 20*time.Second, prog, "client", fmt.Sprint(port), fmt.Sprint(n), fmt.Sprint(i+11), fmt.Sprint(readDelayMS))
		if err := cli.wait(); err != nil || strings.TrimSpace(cli.out.String()) != fmt.Sprintf("ok %d", n) {
			t.Fatalf("%s client %d: %v %q\n%s\nserver: %s", mode, i, err, cli.out.String(), cli.errb.String(), srv.errb.String())
		}
		cliLogs = append(cliLogs, readLog(t, cliSide.log))
	}
	if err := srv.wait(); err != nil {
		t.Fatalf("%s server: %v\n%s", mode, err, srv.errb.String())
	}
	return readLog(t, srvSide.log), cliLogs
}

func TestForkServersKernelBaseline(t *testing.T) {
	for _, mode := range []string{"perconn", "prefork"} {
		forkRun(t, false, mode, 0, 1<<20, 1<<20)
	}
}

// The child of each mode takes over an accelerated connection: switched.
func TestForkServersSwitchToKernel(t *testing.T) {
	// greetfork: the parent answers before it forks and the client reads
	// late, so the client's end switches with unread bytes (its "tail").
	for _, mode := range []string{"perconn", "readfork", "greetfork", "exec", "vfork", "spawn"} {
		t.Run(mode, func(t *testing.T) {
			size, lazy := 2<<20, 0
			switch mode {
			case "perconn":
				size = 10 << 20
			case "greetfork":
				lazy = 100
			}
			srv, cli := forkRunLazy(t, true, mode, 30, lazy, size, 1<<20)
			if n := strings.Count(srv, "accepted accelerated"); n != 1 {
				t.Errorf("server accepted %d accelerated connections, want 1 (the listener is withdrawn at fork)\n%s", n, srv)
			}
			if !strings.Contains(srv, "fork: connection switched to kernel TCP") || !strings.Contains(srv, "reason=fork-exec-decline") {
				t.Errorf("server did not switch the forked connection:\n%s", srv)
			}
			if !strings.Contains(cli[0], "connected accelerated") || !strings.Contains(cli[0], "switched to kernel TCP by its peer") {
				t.Errorf("first client not accelerated then switched:\n%s", cli[0])
			}
			checkSecondClient(t, mode, cli[1])
			noWarnings(t, srv+cli[0])
		})
	}
}

// A connection whose fds are all close-on-exec stays accelerated across a
// fork, and a child that uses it with data calls, poll, select or the
// common socket options goes on over the area itself, without the parent's switch (preload/c/forkkeep.c):
// the echo is exact and nothing is switched. A parent that closes its copy
// first keeps the connection open for the child (shim/forkkeep.go: a
// ghost), which ends it with the child's close.
func TestForkServersKeptAccelerated(t *testing.T) {
	for _, mode := range []string{"perconn", "waitconn", "readfork", "greetfork", "pollconn", "selectconn", "optconn"} {
		t.Run(mode, func(t *testing.T) {
			lazy := 0
			if mode == "greetfork" {
				lazy = 100
			}
			srv, cli := forkRunLazy(t, true, mode+"+cloexec", 30, lazy, 2<<20, 1<<20)
			if !strings.Contains(srv, "fork: connections kept accelerated for the child") {
				t.Errorf("server did not keep the connection at the fork:\n%s", srv)
			}
			if strings.Contains(srv, "switched to kernel TCP") || strings.Contains(srv, "fork-exec-decline") ||
				strings.Contains(srv, "the child uses a kept connection") {
				t.Errorf("server switched a connection its child went on with:\n%s", srv)
			}
			// perconn's parent closes its copy right after the fork, long
			// before the child can have echoed 2 MiB.
			if mode == "perconn" && (!strings.Contains(srv, "kept open for the child") ||
				!strings.Contains(srv, "a connection no process holds any more closed")) {
				t.Errorf("the parent's close did not keep the connection for the child:\n%s", srv)
			}
			if !strings.Contains(cli[0], "connected accelerated") || strings.Contains(cli[0], "switched to kernel TCP") {
				t.Errorf("first client not accelerated to the end:\n%s", cli[0])
			}
			noWarnings(t, srv+cli[0])
		})
	}
}

// A parent that closes its copy once its child exited (the benchmark's
// forkuse: the child exits without closing it) races the news of the
// child's end reaching its core: whichever comes first, the connection
// ends. The server serves one connection at a time, so a connection left
// open would stall the client until its deadline.
func TestForkGhostEnds(t *testing.T) {
	a := build(t)
	prog := cbuildShared(t, "../bench/programs/csrc/forkuse.c", "-I../bench/programs/csrc")
	// Fresh processes each round: the race was seen most around a
	// process's first forks (the second makes the core copy).
	for round := 0; round < 20; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { // its server is killed at its end
			rd := runDir(t)
			logs := t.TempDir()
			port := freePort(t)
			env := func(log string) []string {
				return append(a.environ(t, side{shim: true, log: filepath.Join(logs, log)}, rd), "SDPSHIM_SHORT_CONN=0")
			}
			srv := start(t, env("server.log"), 60*time.Second, prog, "server", fmt.Sprint(port))
			waitListen(t, srv, port)
			cli := start(t, env("client.log"), 20*time.Second, prog, "client", fmt.Sprint(port), "10")
			if err := cli.wait(); err != nil || !strings.Contains(cli.out.String(), `"use_us"`) {
				t.Fatalf("forkuse client: %v %q\n%s", err, cli.out.String(), cli.errb.String())
			}
			log := readLog(t, filepath.Join(logs, "client.log"))
			if n := strings.Count(log, "connected accelerated"); n != 10 {
				t.Errorf("%d of 10 connections accelerated", n)
			}
			if strings.Contains(log, "switched to kernel TCP") || strings.Contains(log, "stays on kernel TCP") {
				t.Errorf("a connection left the area:\n%s", log)
			}
		})
	}
}

// A child whose first call on a kept connection is one it cannot answer
// over the area (epoll_ctl, as a postgres backend's) asks the parent to
// switch it to kernel TCP; so does a child still on the area when its
// parent exits (exitmid: the switch comes in the middle of the echo), and
// a child that forks while its parent's copy is closed (forkconn: the
// family's closes no longer tell when it lets go, so the parent switches
// the connection it kept open).
func TestForkServersKeptThenSwitched(t *testing.T) {
	for _, mode := range []string{"epollconn", "exitmid", "forkconn"} {
		t.Run(mode, func(t *testing.T) {
			sizes, lazy := []int{8 << 20, 1 << 20}, 0
			if mode == "exitmid" {
				// The server is gone after its first connection; the
				// client reads late, so the child waits to write when
				// its parent exits.
				sizes, lazy = sizes[:1], 300
			}
			srv, cli := forkRunLazy(t, true, mode+"+cloexec", 30, lazy, sizes...)
			if !strings.Contains(srv, "fork: connections kept accelerated for the child") {
				t.Errorf("server did not keep the connection at the fork:\n%s", srv)
			}
			if !strings.Contains(srv, "fork: connection switched to kernel TCP") || !strings.Contains(srv, "reason=fork-exec-decline") {
				t.Errorf("server did not switch the connection:\n%s", srv)
			}
			if mode == "epollconn" && !strings.Contains(srv, "the child uses a kept connection") {
				t.Errorf("the child's epoll_ctl did not ask the parent to switch:\n%s", srv)
			}
			if mode == "forkconn" && !strings.Contains(srv, "fork: the child forked") {
				t.Errorf("the child's fork was not told to the parent:\n%s", srv)
			}
			if !strings.Contains(cli[0], "connected accelerated") || !strings.Contains(cli[0], "switched to kernel TCP by its peer") {
				t.Errorf("first client not accelerated then switched:\n%s", cli[0])
			}
			noWarnings(t, srv+cli[0])
		})
	}
}

// A process that exits while its fork child holds a kept connection
// switches it first (the kernel keeps it open for the child): the child,
// whose first use comes when the parent is gone, finds it switched (the
// area says so) and echoes every byte.
func TestForkParentExitsChildServes(t *testing.T) {
	srv, cli := forkRun(t, true, "exitconn+cloexec", 30, 2<<20)
	if !strings.Contains(srv, "fork: connections kept accelerated for the child") || !strings.Contains(srv, "fork: connection switched to kernel TCP") {
		t.Errorf("server did not keep, then switch the connection at its exit:\n%s", srv)
	}
	if !strings.Contains(cli[0], "connected accelerated") || !strings.Contains(cli[0], "switched to kernel TCP by its peer") {
		t.Errorf("client not accelerated then switched:\n%s", cli[0])
	}
	noWarnings(t, srv+cli[0])
}

// When the process that kept a connection for its child is killed, the
// child goes on over the area, as it would with the kernel's socket: the
// echo is exact (killconn). Only a call that needs the switch cannot have
// it any more (killepoll: epoll_ctl first): the child resets the
// connection (logged), and the client sees an error at once instead of
// waiting on a socket nothing would ever arrive on (kernel TCP would go on
// with the child: the one case where the shim's answer differs;
// docs/direct.md).
func TestForkParentKilledChild(t *testing.T) {
	for _, mode := range []string{"killconn", "killepoll"} {
		t.Run(mode, func(t *testing.T) {
			a, prog := forkEcho(t)
			rd := runDir(t)
			logs := t.TempDir()
			srvSide := side{shim: true, log: filepath.Join(logs, "server.log")}
			srv := start(t, a.environ(t, srvSide, rd), 30*time.Second, prog, "server", mode+"+cloexec", "1", "30")
			port := echoPort(t, srv)
			cliSide := side{shim: true, log: filepath.Join(logs, "client.log")}
			began := time.Now()
			cli := start(t, a.environ(t, cliSide, rd), 20*time.Second, prog, "client", fmt.Sprint(port), fmt.Sprint(1<<20), "11")
			err := cli.wait()
			srv.wait()
			log := readLog(t, srvSide.log)
			if mode == "killconn" {
				if err != nil || strings.TrimSpace(cli.out.String()) != fmt.Sprintf("ok %d", 1<<20) {
					t.Fatalf("client against a killed server's child: %v %q\n%s", err, cli.out.String(), cli.errb.String())
				}
				if c := readLog(t, cliSide.log); strings.Contains(c, "switched to kernel TCP") {
					t.Errorf("the child's connection was switched:\n%s", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("client succeeded against a killed server's child: %q", cli.out.String())
			}
			if d := time.Since(began); d > 15*time.Second {
				t.Errorf("client took %v to fail", d)
			}
			if !strings.Contains(log, "the parent did not switch the connections it kept for this child; 1 reset") {
				t.Errorf("the child did not report the reset:\n%s", log)
			}
		})
	}
}

// A fork child that never uses the connections it inherits (redis-server's
// BGSAVE child; one closes its copy first, one execs) leaves them
// accelerated: the echo stays exact and nothing is switched.
func TestForkChildUnusedStaysAccelerated(t *testing.T) {
	srv, cli := forkRun(t, true, "bgsave+cloexec", 0, 4<<20, 1<<20)
	for i, c := range cli {
		if !strings.Contains(c, "connected accelerated") || strings.Contains(c, "switched to kernel TCP") {
			t.Errorf("client %d not accelerated to the end:\n%s", i, c)
		}
	}
	if n := strings.Count(srv, "fork: connections kept accelerated for the child"); n != 6 {
		t.Errorf("server kept connections at %d forks, want 6 (three per connection)\n%s", n, srv)
	}
	if strings.Contains(srv, "switched to kernel TCP") || strings.Contains(srv, "fork-exec-decline") {
		t.Errorf("server switched a connection its children never used:\n%s", srv)
	}
	noWarnings(t, srv+strings.Join(cli, ""))
}

// checkSecondClient checks the connection a client made after the
// server's first fork. fork() made the listener a group listener
// (deferred acceptance: the process that first uses an accepted fd
// claims it; tests/preload_deferred_test.go): perconn's child serves it
// accelerated, and so does exec's new program (the exec passes the
// inherited CANDIDATE fd on: preload/c/exec.c); readfork's and
// greetfork's parent uses it first (accelerated), then forks (switched);
// vfork and spawn make no group listener (their children exec), so it is
// withdrawn as before.
func checkSecondClient(t *testing.T, mode, log string) {
	t.Helper()
	accelerated := strings.Contains(log, "connected accelerated")
	deferred := strings.Contains(log, "connecting to a group listener: deferred")
	switched := strings.Contains(log, "switched to kernel TCP by its peer")
	var ok bool
	switch mode {
	case "perconn", "exec":
		ok = deferred && accelerated && !switched
	case "readfork", "greetfork":
		ok = deferred && accelerated && switched
	default:
		ok = !deferred && !accelerated && strings.Contains(log, "reason=peer-not-shimmed")
	}
	if !ok {
		t.Errorf("%s: second client (after the first fork) not as expected:\n%s", mode, log)
	}
}

// An exec passes the CANDIDATE sockets it keeps in SDPSHIM__INHERITED_FDS
// (preload/c/exec.c); the new program's interposer takes the variable out
// of the environment before the program runs: a shimmed python with an
// inheritable listening socket execs env (through execv) and sh -c (through
// execvp's path search), and neither sees the variable; env exec'd
// without the interposer (LD_PRELOAD dropped) does see it, naming the
// socket.
func TestExecHidesInheritedFDs(t *testing.T) {
	a := build(t)
	env := a.environ(t, side{shim: true}, runDir(t))
	for _, tc := range []struct {
		name, exec string
		seen       bool
	}{
		{"execv", "os.execv('/usr/bin/env', ['env'])", false},
		{"execvp", "os.execvp('sh', ['sh', '-c', 'echo \"[$SDPSHIM__INHERITED_FDS]\"; env'])", false},
		{"unshimmed", "os.execve('/usr/bin/env', ['env'], {k: v for k, v in os.environ.items() if k != 'LD_PRELOAD'})", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := "import os, socket\n" +
				"s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n" +
				"os.set_inheritable(s.fileno(), True)\n" + tc.exec + "\n"
			out := runTo(t, env, 20*time.Second, "python3", "-c", script)
			want := fmt.Sprintf("SDPSHIM__INHERITED_FDS=%d\n", 3)
			if tc.seen != strings.Contains(out, want) || (!tc.seen && strings.Contains(out, "SDPSHIM__INHERITED_FDS")) {
				t.Errorf("the exec'd program sees the variable: %v, want %v (%q):\n%s", !tc.seen, tc.seen, want, out)
			}
			if !strings.Contains(out, "PATH=") {
				t.Errorf("no environment printed:\n%s", out)
			}
		})
	}
}
