package programs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What one message costs the server process, per message, next to kernel
// TCP: system calls, context switches (every thread of the process),
// wakeups it makes, and CPU time, counted by perf stat around the server
// (csrc/costpair.c). These counts predict the real programs' figures and
// survive a noisy machine better than times do.

// costShape is one row group of the cost table.
type costShape struct {
	key, label string
	mode       string   // costpair's mode
	msgs       [2]int   // messages: full run, quick run
	conns      int      // connections (epoll)
	idle       int      // connections beside them that carry nothing (epoll)
	env        []string // extra environment under the shim
}

var costShapes = []costShape{
	{key: "pp", label: "ping-pong 64 B, polling (default)", mode: "pp", msgs: [2]int{20000, 2000}},
	{key: "ppev", label: "ping-pong 64 B, SDPSHIM_POLL=event", mode: "pp", msgs: [2]int{20000, 2000}, env: []string{"SDPSHIM_POLL=event"}},
	{key: "stream", label: "stream of 64 KiB writes", mode: "stream", msgs: [2]int{20000, 2000}},
	{key: "epoll", label: "epoll server, 64 connections, 64 B requests", mode: "epoll", msgs: [2]int{64000, 6400}, conns: 64},
	// Most connections of a server are idle at any moment (keep-alive
	// clients, pools): a wait should cost what its ready sockets cost.
	// Many messages: the 1000 connections' setup, which the difference
	// of two runs cancels, varies by tens of ms.
	{key: "epollidle", label: "epoll server, 4 busy connections beside 1000 idle", mode: "epoll", msgs: [2]int{1000000, 100000}, conns: 4, idle: 1000},
	// One connection: every epoll_wait sleeps (postgres's backends, a
	// quiet event loop), and the same in a fork child, which runs a core
	// of its own (pre-fork servers: nginx's workers, postgres).
	{key: "epoll1", label: "epoll server, 1 connection (every wait sleeps)", mode: "epoll", msgs: [2]int{20000, 2000}, conns: 1},
	{key: "forkepoll", label: "epoll server in a fork child, 1 connection", mode: "forkepoll", msgs: [2]int{20000, 2000}, conns: 1},
	// A message is a connection: connect, a 64 B round trip, close, one
	// after another, every one accelerated (the short-lived rule would
	// keep most on kernel TCP).
	{key: "conn", label: "connection setup (connect, 64 B round trip, close; a message is a connection)", mode: "conn", msgs: [2]int{2000, 200}, env: []string{"SDPSHIM_SHORT_CONN=0"}},
}

// costMetrics are perf's events and the keys they are recorded under.
var costMetrics = []struct{ event, key, label string }{
	{"raw_syscalls:sys_enter", "sys", "system calls"},
	{"context-switches", "csw", "context switches"},
	{"sched:sched_wakeup", "wake", "wakeups made"},
	{"task-clock", "cpu", "CPU us"},
}

// msgCosts measures every cost shape in mode m.
func (h *harness) msgCosts(m mode) (map[string]float64, error) {
	prog, err := h.cprog("costpair")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, cs := range costShapes {
		got, err := h.msgCost(m, prog, cs)
		if err != nil {
			return out, fmt.Errorf("%s: %w", cs.key, err)
		}
		for k, v := range got {
			out[k] = v
		}
	}
	return out, nil
}

// msgCost runs one shape twice, with a tenth of the messages and with all
// of them, and returns the server's counts per message from the
// difference: what starting, connecting and ending cost (the Go core's
// load, for one) cancels out.
func (h *harness) msgCost(m mode, prog string, cs costShape) (map[string]float64, error) {
	n := cs.msgs[0]
	if h.quick {
		n = cs.msgs[1]
	}
	small, err := h.msgCostRun(m, prog, cs, n/10)
	if err != nil {
		return nil, err
	}
	big, err := h.msgCostRun(m, prog, cs, n)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, c := range costMetrics {
		k := "cost." + cs.key + "." + c.key
		out[k] = max(big[c.event]-small[c.event], 0) / float64(n-n/10)
		if c.key == "cpu" {
			out[k] *= 1e3 // task-clock is in ms
		}
	}
	return out, nil
}

// msgCostRun runs the shape once with n messages: the server under perf
// stat, the client beside it; it returns perf's counts.
func (h *harness) msgCostRun(m mode, prog string, cs costShape, n int) (map[string]float64, error) {
	rd, port, err := h.pair()
	if err != nil {
		return nil, err
	}
	environ := h.env.of(m, rd)
	if m == shimmed {
		environ = append(environ, cs.env...)
	}
	stat := filepath.Join(h.env.tmp, "perf-"+cs.key+"-"+m.String()+".csv")
	events := make([]string, len(costMetrics))
	for i, c := range costMetrics {
		events[i] = c.event
	}
	srv, err := startServer(environ, nil, "perf", "stat", "-x,", "-o", stat, "-e", strings.Join(events, ","), "--",
		prog, "server", strconv.Itoa(port), cs.mode)
	if err != nil {
		return nil, err
	}
	defer srv.stop(syscall.SIGTERM)
	if err := srv.waitListen(port); err != nil {
		return nil, err
	}
	res, err := runClient(environ, nil, h.limit(), prog, "client", strconv.Itoa(port), cs.mode, strconv.Itoa(n), strconv.Itoa(max(cs.conns, 1)), strconv.Itoa(cs.idle))
	if err != nil {
		return nil, err
	}
	var r struct {
		Msgs float64 `json:"msgs"`
	}
	if err := json.Unmarshal([]byte(firstLine(strings.TrimSpace(res))), &r); err != nil || r.Msgs != float64(n) {
		return nil, fmt.Errorf("costpair client: %q", res)
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		if err != nil {
			return nil, fmt.Errorf("server under perf: %v\n%s", err, tailOf(srv.out.String()))
		}
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("server did not end after its client")
	}
	counts, err := readPerfStat(stat)
	if err != nil {
		return nil, err
	}
	for _, c := range costMetrics {
		if _, ok := counts[c.event]; !ok {
			return nil, fmt.Errorf("perf stat counted no %s (root and tracefs are needed)", c.event)
		}
	}
	return counts, nil
}

// readPerfStat parses perf stat -x, output: value,unit,event,...
func readPerfStat(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, ",")
		if len(f) < 3 || strings.HasPrefix(l, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			out[f[2]] = v
		}
	}
	return out, nil
}
