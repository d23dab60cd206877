package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Socket and event API semantics of accelerated sockets: each
// testdata/sem_*.c program checks a group of them on connections the
// process makes to itself and prints a transcript of what it observed.
// It runs over kernel TCP and under the shim; the transcripts must be
// equal, and under the shim every connection it made must have been
// accelerated. sem_wake covers wakeups of threads asleep in epoll_wait and
// poll (the ae pattern of deleting and re-adding a socket around every
// request, sleepers and writers racing, two sleepers in one set, nested
// and polled sets): the shim writes a set's eventfds only while a thread
// is armed for a kernel sleep (shim/epoll.go), so a lost wakeup shows as
// a timeout line in its transcript. sem_park covers the entries an
// interposer's wait parks (preload/c/epollfast.c): one busy connection at
// a time among 64, level- and edge-triggered, replies that wait for room.
// sem_add covers sockets added to a set while a thread waits in it (the
// interposer's snapshot grows in place).
func TestSemantics(t *testing.T) {
	a := build(t)
	for _, prog := range []string{"sem_epoll", "sem_sock", "sem_signal", "sem_wake", "sem_park", "sem_add"} {
		t.Run(prog, func(t *testing.T) {
			t.Parallel()
			bin := semBuild(t, prog)
			kernel, _, _ := semRun(t, a, bin, side{})
			log := filepath.Join(t.TempDir(), "shim.log")
			shimmed, pairs, shimErr := semRun(t, a, bin, side{shim: true, log: log})
			if d := transcriptDiff(kernel, shimmed); d != "" {
				t.Errorf("transcripts differ (kernel TCP, then shim):\n%s", d)
			}
			if m := evictedLine.FindStringSubmatch(shimErr); prog == "sem_epoll" && (m == nil || m[1] == "0") {
				t.Errorf("no eventfd of the shim moved for a dup2 onto it: %q", m)
			}
			l := readLog(t, log)
			if n := strings.Count(l, "connected accelerated"); n != pairs || pairs == 0 {
				t.Errorf("%d of %d connections accelerated under the shim:\n%s", n, pairs, l)
			}
		})
	}
}

// A kernel fd (a pipe) of an epoll set that holds an accelerated socket
// becomes ready while epoll_wait polls (testdata/epoll_spin.c), with the
// default wait policy and with SDPSHIM_POLL=busy, where every wait polls
// until it finds the fd. A wait that found it during its poll returned
// it twice, and a server that accepts once per listener event then
// blocked in accept().
func TestEpollSpinKernelFD(t *testing.T) {
	a := build(t)
	t.Parallel()
	bin := semBuild(t, "epoll_spin")
	kernel, _, _ := semRun(t, a, bin, side{})
	for _, env := range [][]string{nil, {"SDPSHIM_POLL=busy"}} {
		shimmed, pairs, _ := semRun(t, a, bin, side{shim: true, env: env})
		if d := transcriptDiff(kernel, shimmed); d != "" || pairs == 0 {
			t.Errorf("%v: transcripts differ (kernel TCP, then the shim):\n%s", env, d)
		}
	}
}

// sem_epoll's transcript with SDPSHIM_POLL=busy, whose waits poll
// without end until something is ready or the program's timeout passes:
// an epoll_wait with a timeout on a set with nothing ready polled on past
// it, for good.
func TestSemanticsBusyPoll(t *testing.T) {
	a := build(t)
	t.Parallel()
	bin := semBuild(t, "sem_epoll")
	kernel, _, _ := semRun(t, a, bin, side{})
	shimmed, _, _ := semRun(t, a, bin, side{shim: true, env: []string{"SDPSHIM_POLL=busy"}})
	if d := transcriptDiff(kernel, shimmed); d != "" {
		t.Errorf("transcripts differ (kernel TCP, then the shim polling):\n%s", d)
	}
}

// An idle server under the shim (epoll_wait, a blocked read and a
// blocked poll over accelerated connections, testdata/sem_idle.c) costs
// no CPU: its CPU time over a few seconds stays under 10% of the elapsed
// time (a bound loose enough for a busy machine; the real figure is
// logged, and is about 0).
func TestIdleServerCPU(t *testing.T) {
	a := build(t)
	t.Parallel()
	bin := semBuild(t, "sem_idle")
	log := filepath.Join(t.TempDir(), "shim.log")
	p := start(t, a.environ(t, side{shim: true, log: log}, runDir(t)), 30*time.Second, bin, "8")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("sem_idle not ready:\n%s%s", p.out.String(), p.errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // setup's stragglers
	pid := p.cmd.Process.Pid
	const window = 4 * time.Second
	t0, c0 := time.Now(), cpuTicks(t, pid)
	time.Sleep(window)
	t1, c1 := time.Now(), cpuTicks(t, pid)
	const hz = 100 // USER_HZ: /proc/PID/stat's unit on Linux
	cpu := time.Duration(c1-c0) * time.Second / hz
	elapsed := t1.Sub(t0)
	t.Logf("idle server CPU: %v over %v (%.2f%%)", cpu, elapsed.Round(time.Millisecond), 100*cpu.Seconds()/elapsed.Seconds())
	if cpu > elapsed/10 {
		t.Errorf("idle server used %v of CPU in %v", cpu, elapsed)
	}
	if strings.Contains(p.out.String(), "woke") {
		t.Errorf("idle epoll_wait returned with nothing sent:\n%s", p.out.String())
	}
	m := pairsLine.FindStringSubmatch(p.errb.String())
	if n := strings.Count(readLog(t, log), "accepted accelerated"); m == nil || strconv.Itoa(n) != m[1] {
		t.Errorf("accepted accelerated: %d, connections: %v", n, m)
	}
}

// cpuTicks returns the user and system CPU time of process pid, in clock
// ticks (/proc/PID/stat fields 14 and 15).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// semBuild compiles testdata/NAME.c.
func semBuild(t *testing.T, name string) string {
	t.Helper()
	return cbuild(t, filepath.Join("testdata", name+".c"), "-pthread")
}

var (
	pairsLine   = regexp.MustCompile(`(?m)^pairs (\d+)$`)
	evictedLine = regexp.MustCompile(`(?m)^evicted (\d+) busy (\d+)$`)
)

// semRun runs a sem program as s and returns its transcript, the
// connections it reported making and its stderr.
func semRun(t *testing.T, a artefacts, bin string, s side) (string, int, string) {
	t.Helper()
	p := start(t, a.environ(t, s, runDir(t)), 30*time.Second, bin)
	err := p.wait()
	m := pairsLine.FindStringSubmatch(p.errb.String())
	if err != nil || m == nil {
		t.Fatalf("%s (shim %v): %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), s.shim, err, p.out.String(), p.errb.String())
	}
	var n int
	fmt.Sscan(m[1], &n)
	return p.out.String(), n, p.errb.String()
}

// transcriptDiff lists the lines that differ, "" when none.
func transcriptDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var x, y string
		if i < len(w) {
			x = w[i]
		}
		if i < len(g) {
			y = g[i]
		}
		if x != y {
			fmt.Fprintf(&b, "  kernel: %s\n  shim:   %s\n", x, y)
		}
	}
	return b.String()
}
